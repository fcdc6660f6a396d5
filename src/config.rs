//! TEMPORARY stand-in until the real zoo.cfg parser lands (same interface).
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub enum FourLetterWhitelist {
    All,
    Words(BTreeSet<String>),
}
impl FourLetterWhitelist {
    pub fn allows(&self, word: &str) -> bool {
        match self {
            FourLetterWhitelist::All => true,
            FourLetterWhitelist::Words(w) => w.contains(word),
        }
    }
}
pub enum CpuPinning {
    None,
    Cpus(Vec<usize>),
}
pub struct Config {
    pub client_port: u16,
    pub client_port_address: IpAddr,
    pub data_dir: PathBuf,
    pub tick_time_ms: u32,
    pub min_session_timeout_ms: u32,
    pub max_session_timeout_ms: u32,
    pub four_letter_whitelist: FourLetterWhitelist,
    pub jute_max_buffer: usize,
    pub extended_types_enabled: bool,
    pub super_digest: Option<String>,
    pub shard_count: Option<usize>,
    pub cpu_pinning: CpuPinning,
}
impl Config {
    pub fn embedded_default() -> Config {
        Config {
            client_port: 2181,
            client_port_address: "127.0.0.1".parse().unwrap(),
            data_dir: "./data".into(),
            tick_time_ms: 2000,
            min_session_timeout_ms: 4000,
            max_session_timeout_ms: 40000,
            four_letter_whitelist: FourLetterWhitelist::All,
            jute_max_buffer: 0xfffff,
            extended_types_enabled: false,
            super_digest: None,
            shard_count: None,
            cpu_pinning: CpuPinning::None,
        }
    }
    pub fn load(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let mut c = Config::embedded_default();
        for line in text.lines() {
            if let Some((k, v)) = line.split_once('=') {
                match k.trim() {
                    "clientPort" => c.client_port = v.trim().parse().unwrap(),
                    "dataDir" => c.data_dir = v.trim().into(),
                    "extendedTypesEnabled" => c.extended_types_enabled = v.trim() == "true",
                    _ => {}
                }
            }
        }
        Ok(c)
    }
    pub fn session_timeout_clamp(&self, requested_ms: i32) -> i32 {
        requested_ms.clamp(
            self.min_session_timeout_ms as i32,
            self.max_session_timeout_ms as i32,
        )
    }
}
