//! Apache Curator (Debian's libcurator-recipes-java and
//! libcurator-framework-java, 5.4): tests/curator/*.java compiled with javac
//! into a temporary directory and run with `java` against one server or
//! against the members of an ensemble (each Curator client pinned to one of
//! them in turn). The program prints one PASS/FAIL line per recipe.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::bounded::{run_bounded, Finished};
use super::ZK_JAR;

const CURATOR_JARS: [&str; 3] = [
    "/usr/share/java/curator-recipes.jar",
    "/usr/share/java/curator-framework.jar",
    "/usr/share/java/curator-client.jar",
];
/// The PASS lines expected: the four recipes of issue #5, then more of
/// Curator's recipes, its transactions, and a reconnect (setWatches).
pub const RECIPES: [&str; 11] = [
    "InterProcessMutex",
    "LeaderLatch",
    "CuratorCache",
    "DistributedAtomicLong",
    "InterProcessReadWriteLock",
    "InterProcessSemaphoreV2",
    "LeaderSelector",
    "SharedCount",
    "DistributedDoubleBarrier",
    "Transaction",
    "Reconnect",
];
const JAVAC_TIMEOUT: Duration = Duration::from_secs(120);
pub const RUN_TIMEOUT: Duration = Duration::from_secs(240);

fn classpath() -> String {
    for jar in CURATOR_JARS.iter().chain([&ZK_JAR]) {
        assert!(
            Path::new(jar).exists(),
            "{jar} is missing: apt-get install -y libcurator-recipes-java \
             libcurator-framework-java zookeeper"
        );
    }
    let mut cp: Vec<&str> = CURATOR_JARS.to_vec();
    cp.push(ZK_JAR);
    cp.join(":")
}

fn sources() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/curator");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "java"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no Java sources in {}", dir.display());
    v
}

/// Compiles the recipes program into `classes`; returns the classpath that
/// runs it.
pub fn compile(classes: &Path) -> String {
    let cp = classpath();
    let mut cmd = Command::new("javac");
    cmd.arg("-nowarn")
        .arg("-encoding")
        .arg("UTF-8")
        .arg("-d")
        .arg(classes)
        .arg("-cp")
        .arg(&cp)
        .args(sources());
    let run = run_bounded(cmd, Stdio::null(), classes, "javac", JAVAC_TIMEOUT);
    assert!(
        run.success(),
        "javac failed ({:?}; is default-jdk-headless installed?):\n{}\n{}",
        run.status,
        run.out,
        run.err
    );
    format!("{}:{cp}", classes.display())
}

/// Runs the compiled program (classpath from `compile`, which wrote into
/// `work`) with its clients spread over `servers` in turn.
pub fn run_recipes(cp: &str, work: &Path, servers: &[String]) -> Finished {
    let mut cmd = Command::new("java");
    cmd.arg("-Xmx256m")
        .arg("-XX:TieredStopAtLevel=1")
        .arg("-cp")
        .arg(cp)
        .arg("Recipes")
        .args(servers);
    run_bounded(cmd, Stdio::null(), work, "recipes", RUN_TIMEOUT)
}
