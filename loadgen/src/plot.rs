//! --plot FILE.svg: the paper's figures, drawn with plotters' SVG backend.
//! mix/compare: throughput vs % reads (one line per target, and per depth
//! when several --outstanding were measured) over latency percentiles vs
//! % reads, and with --server-pid the server's CPU, syscalls and context
//! switches per op against the depth (or % reads at one depth); creates: creates/s vs workers; latency: ms/op per
//! phase; timeline: ops/s over time with the events marked.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::creates::CreatesPoint;
use crate::latency::LatencyRun;
use crate::mix::MixPoint;
use crate::timeline::Timeline;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn e<E: std::fmt::Display>(err: E) -> String {
    format!("plot: {err}")
}

fn color(i: usize) -> RGBColor {
    // Distinct, print-friendly colours (Okabe-Ito).
    const C: [RGBColor; 7] = [
        RGBColor(0, 114, 178),
        RGBColor(213, 94, 0),
        RGBColor(0, 158, 115),
        RGBColor(204, 121, 167),
        RGBColor(230, 159, 0),
        RGBColor(86, 180, 233),
        RGBColor(0, 0, 0),
    ];
    C[i % C.len()]
}

fn targets_of<'a>(names: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for n in names {
        if !v.contains(n) {
            v.push(n.clone());
        }
    }
    v
}

/// A mix point's line: its target, and its depth when several were measured.
fn series_of(p: &MixPoint, depths: bool) -> String {
    if depths {
        format!("{} x{}", p.target, p.outstanding)
    } else {
        p.target.clone()
    }
}

/// Throughput and latency percentiles vs % reads (medians per point), and
/// the server's cost per op when it was measured.
pub fn mix(path: &str, points: &[MixPoint], title: &str) -> Result<(), String> {
    let server = points.iter().any(|p| p.server.is_some());
    let height = if server { 1500 } else { 1000 };
    let root = SVGBackend::new(path, (960, height)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let (top, rest) = root.split_vertically(500);
    let (middle, bottom) = rest.split_vertically(500);
    let depths = points
        .iter()
        .any(|p| p.outstanding != points[0].outstanding);
    let named: Vec<(String, &MixPoint)> =
        points.iter().map(|p| (series_of(p, depths), p)).collect();
    let series = targets_of(named.iter().map(|(s, _)| s));
    mix_throughput(&top, &named, &series, title)?;
    mix_latency(&middle, &named, &series)?;
    if server {
        let (left, right) = bottom.split_horizontally(480);
        server_cost(&left, points, depths, false)?;
        server_cost(&right, points, depths, true)?;
    }
    root.present().map_err(e)
}

/// Server cost per op: CPU us (`!calls`), or syscalls (solid) and context
/// switches (dashed). Against the depth, one line per (target, read%),
/// when several depths were measured; else against % reads, one per target.
fn server_cost(area: &Area, points: &[MixPoint], depths: bool, calls: bool) -> Result<(), String> {
    let with: Vec<&MixPoint> = points.iter().filter(|p| p.server.is_some()).collect();
    let x_of = |p: &MixPoint| {
        if depths {
            p.outstanding as u32
        } else {
            p.read_pct
        }
    };
    let mut xs: Vec<u32> = with.iter().map(|p| x_of(p)).collect();
    xs.sort_unstable();
    xs.dedup();
    let slot = |p: &MixPoint| xs.iter().position(|&x| x == x_of(p)).unwrap_or(0) as f64;
    let key = |p: &MixPoint| {
        if depths {
            format!("{} {}%", p.target, p.read_pct)
        } else {
            p.target.clone()
        }
    };
    let keys: Vec<String> = targets_of(with.iter().map(|p| key(p)).collect::<Vec<_>>().iter());
    type Metric = fn(&crate::servercost::ServerWindow) -> Option<f64>;
    let metrics: Vec<(Metric, bool)> = if calls {
        vec![
            (|s| s.syscalls_per_op, false),
            (|s| Some(s.ctx_switches_per_op), true),
        ]
    } else {
        vec![(|s| Some(s.cpu_us_per_op), false)]
    };
    let ymax = with
        .iter()
        .flat_map(|p| metrics.iter().filter_map(|(m, _)| m(p.server.as_ref()?)))
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.15;
    let caption = if calls {
        "server syscalls per op (solid), context switches per op (dashed)"
    } else {
        "server CPU us per op"
    };
    let labels = xs.clone();
    let n = xs.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..ymax)
        .map_err(e)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&move |x| {
            let i = x.round();
            match labels.get(i as usize) {
                Some(v) if (x - i).abs() < 0.01 && i >= 0.0 => v.to_string(),
                _ => String::new(),
            }
        })
        .x_desc(if depths {
            "outstanding per session"
        } else {
            "% read requests"
        })
        .y_desc(if calls { "per op" } else { "us per op" })
        .draw()
        .map_err(e)?;
    for (i, k) in keys.iter().enumerate() {
        let c = color(i);
        let mut mine: Vec<&&MixPoint> = with.iter().filter(|p| &key(p) == k).collect();
        mine.sort_by_key(|p| x_of(p));
        for (m, dashed) in &metrics {
            let s: Vec<(f64, f64)> = mine
                .iter()
                .filter_map(|p| Some((slot(p), m(p.server.as_ref()?)?)))
                .collect();
            if *dashed {
                chart
                    .draw_series(DashedLineSeries::new(s.clone(), 6, 4, c.stroke_width(1)))
                    .map_err(e)?;
            } else {
                chart
                    .draw_series(LineSeries::new(s.clone(), c.stroke_width(2)))
                    .map_err(e)?
                    .label(k.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                    });
            }
            chart
                .draw_series(s.iter().map(|&p| Circle::new(p, 3, c.filled())))
                .map_err(e)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)
}

fn mix_throughput(
    area: &Area,
    points: &[(String, &MixPoint)],
    targets: &[String],
    title: &str,
) -> Result<(), String> {
    let ymax = points.iter().map(|p| p.1.ops_per_s).fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0u32..100u32, 0f64..ymax)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("% read requests")
        .y_desc("operations per second")
        .y_label_formatter(&|v| format!("{:.0}", v))
        .draw()
        .map_err(e)?;
    for (i, t) in targets.iter().enumerate() {
        let c = color(i);
        let mut s: Vec<(u32, f64)> = points
            .iter()
            .filter(|p| &p.0 == t)
            .map(|(_, p)| (p.read_pct, p.ops_per_s))
            .collect();
        s.sort_by_key(|p| p.0);
        chart
            .draw_series(LineSeries::new(s.clone(), c.stroke_width(2)))
            .map_err(e)?
            .label(t.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(s.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)
}

fn mix_latency(
    area: &Area,
    points: &[(String, &MixPoint)],
    targets: &[String],
) -> Result<(), String> {
    let lats = points.iter().flat_map(|(_, p)| {
        [
            (p.read_latency_us.count, p.read_latency_us.p50),
            (p.read_latency_us.count, p.read_latency_us.p99),
            (p.write_latency_us.count, p.write_latency_us.p50),
            (p.write_latency_us.count, p.write_latency_us.p99),
        ]
    });
    let (mut lo, mut hi) = (u64::MAX, 1u64);
    for (n, v) in lats {
        if n > 0 {
            lo = lo.min(v.max(1));
            hi = hi.max(v);
        }
    }
    if lo > hi {
        lo = 1;
    }
    let ms = |us: u64| us as f64 / 1e3;
    let mut chart = ChartBuilder::on(area)
        .caption(
            "latency percentiles (solid p50, dashed p99; o reads, x writes)",
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0u32..100u32, (ms(lo) * 0.8..ms(hi) * 1.25).log_scale())
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("% read requests")
        .y_desc("latency (ms, log)")
        .y_label_formatter(&|v| format!("{v}"))
        .light_line_style(WHITE)
        .draw()
        .map_err(e)?;
    for (i, t) in targets.iter().enumerate() {
        let c = color(i);
        let mut mine: Vec<&MixPoint> = points.iter().filter(|p| &p.0 == t).map(|p| p.1).collect();
        mine.sort_by_key(|p| p.read_pct);
        for (write, q99) in [(false, false), (false, true), (true, false), (true, true)] {
            let s: Vec<(u32, f64)> = mine
                .iter()
                .filter_map(|p| {
                    let l = if write {
                        &p.write_latency_us
                    } else {
                        &p.read_latency_us
                    };
                    (l.count > 0).then(|| (p.read_pct, ms(if q99 { l.p99 } else { l.p50 })))
                })
                .collect();
            let style = c.stroke_width(if write { 1 } else { 2 });
            if q99 {
                chart
                    .draw_series(DashedLineSeries::new(s.clone(), 6, 4, style))
                    .map_err(e)?;
            } else {
                let series = chart
                    .draw_series(LineSeries::new(s.clone(), style))
                    .map_err(e)?;
                if !write {
                    series.label(t.as_str()).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                    });
                }
            }
            if write {
                chart
                    .draw_series(s.iter().map(|&p| Cross::new(p, 4, c.stroke_width(1))))
                    .map_err(e)?;
            } else {
                chart
                    .draw_series(s.iter().map(|&p| Circle::new(p, 3, c.stroke_width(1))))
                    .map_err(e)?;
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)
}

/// Creates per second vs the number of workers (Table 2 as a figure).
pub fn creates(path: &str, points: &[CreatesPoint]) -> Result<(), String> {
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let targets = targets_of(points.iter().map(|p| &p.target));
    let xmax = points.iter().map(|p| p.workers as u32).max().unwrap_or(1) + 1;
    let ymax = points.iter().map(|p| p.creates_per_s).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "creates/s: sync create + async delete per worker",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0u32..xmax, 0f64..ymax)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("workers")
        .y_desc("creates per second")
        .y_label_formatter(&|v| format!("{:.0}", v))
        .draw()
        .map_err(e)?;
    for (i, t) in targets.iter().enumerate() {
        let c = color(i);
        let s: Vec<(u32, f64)> = points
            .iter()
            .filter(|p| &p.target == t)
            .map(|p| (p.workers as u32, p.creates_per_s))
            .collect();
        chart
            .draw_series(LineSeries::new(s.clone(), c.stroke_width(2)))
            .map_err(e)?
            .label(t.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(s.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}

/// ms/op per zk-latencies phase: one bar per (target, server, mode).
pub fn latency(path: &str, runs: &[LatencyRun]) -> Result<(), String> {
    let root = SVGBackend::new(path, (1100, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let phases: Vec<&crate::latency::Phase> = runs.iter().flat_map(|r| &r.phases).collect();
    let names = targets_of(phases.iter().map(|p| &p.phase));
    let series = targets_of(
        phases
            .iter()
            .map(|p| format!("{} {} {}", p.target, p.server, p.mode))
            .collect::<Vec<_>>()
            .iter(),
    );
    let vals = phases.iter().map(|p| p.ms_per_op).filter(|v| *v > 0.0);
    let lo = vals.clone().fold(f64::MAX, f64::min).min(1.0) * 0.5;
    let hi = vals.fold(1e-3, f64::max) * 2.0;
    let n = names.len().max(1);
    let labels = names.clone();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "zk-latencies phases: ms per operation (log)",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, (lo..hi).log_scale())
        .map_err(e)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&move |x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("ms/op")
        .light_line_style(WHITE)
        .draw()
        .map_err(e)?;
    let width = 0.8 / series.len().max(1) as f64;
    for (si, sname) in series.iter().enumerate() {
        let c = color(si);
        let bars: Vec<Rectangle<(f64, f64)>> = phases
            .iter()
            .filter(|p| &format!("{} {} {}", p.target, p.server, p.mode) == sname)
            .filter_map(|p| {
                let x = names.iter().position(|n| *n == p.phase)? as f64 - 0.4 + si as f64 * width;
                Some(Rectangle::new(
                    [(x, lo), (x + width * 0.9, p.ms_per_op.max(lo))],
                    c.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(e)?
            .label(sname.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}

/// ops/s every interval over the run, events marked (the paper's Figure 8).
pub fn timeline(path: &str, t: &Timeline) -> Result<(), String> {
    let root = SVGBackend::new(path, (1100, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let xmax = t.samples.last().map(|s| s.t_s).unwrap_or(1.0).max(0.1);
    let ymax = t.samples.iter().map(|s| s.ops_per_s).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{}: throughput every {} ms, {}% reads",
                t.target, t.interval_ms, t.read_pct
            ),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("operations per second")
        .y_label_formatter(&|v| format!("{:.0}", v))
        .draw()
        .map_err(e)?;
    type Rate = fn(&crate::timeline::Sample) -> f64;
    let lines: [(&str, Rate, RGBColor); 3] = [
        ("throughput", |s| s.ops_per_s, color(0)),
        ("reads", |s| s.reads_per_s, color(2)),
        ("writes", |s| s.writes_per_s, color(1)),
    ];
    for (name, f, c) in lines {
        chart
            .draw_series(LineSeries::new(
                t.samples.iter().map(|s| (s.t_s, f(s))),
                c.stroke_width(if name == "throughput" { 2 } else { 1 }),
            ))
            .map_err(e)?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    let red = RGBColor(200, 0, 0);
    if t.samples.iter().any(|s| s.errors > 0) {
        chart
            .draw_series(LineSeries::new(
                t.samples.iter().map(|s| (s.t_s, s.errors_per_s.min(ymax))),
                red.stroke_width(1),
            ))
            .map_err(e)?
            .label("errors (replies with an error code, requests lost)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], red.stroke_width(1)));
    }
    for (i, ev) in t.events.iter().enumerate() {
        let x = ev.started_s;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x, 0.0), (x, ymax)],
                5,
                4,
                red.stroke_width(1),
            ))
            .map_err(e)?;
        let label: String = ev.command.chars().take(40).collect();
        let y = ymax * (0.97 - 0.05 * (i % 4) as f64);
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{}: {label}", i + 1),
                (x, y),
                ("sans-serif", 13).into_font().color(&red),
            )))
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}
