//! `hashfs-bench paper`, the papers' evaluations: without the cycle probe it says how to
//! get it; with it (`--features hashfs-bench/probe`, as scripts/test.sh builds it), a tiny
//! run of every experiment, its JSON, and bench/plot.py's figures and verdicts from it.

#[path = "../../hashfs-cli/tests/support/skip.rs"]
mod skip;
#[cfg(feature = "probe")]
use skip::skip;
use std::path::Path;
#[cfg(feature = "probe")]
use std::path::PathBuf;
use std::process::{Command, Output};

fn hashfs_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hashfs-bench")).args(args).output().expect("runs")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Without the cycle probe compiled in, `hashfs-bench paper` says how to get it and does
/// nothing else.
#[cfg(not(feature = "probe"))]
#[test]
fn paper_benchmark_needs_the_probe() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let o = hashfs_bench(&["paper", "--tiny", "--out", s(&out), "--image-dir", s(dir.path())]);
    assert_ne!(code(&o), 0);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--features hashfs-bench/probe"), "{o:?}");
    assert!(!out.exists(), "nothing written");
}

/// `hashfs-bench paper` at a tiny scale: every experiment runs, every mapping appears in
/// the JSON with finite, positive figures (the figures themselves mean nothing here). Runs
/// in the probe build (scripts/test.sh: `--features probe`).
#[cfg(feature = "probe")]
#[test]
fn paper_benchmark_smoke() {
    // Images in DRAM (/dev/shm, as the real runs' default), not on the disk /tmp may be on.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let Some(tools) = ycsb_tools(dir.path()) else { return };
    let out = dir.path().join("results");
    let paper = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_hashfs-bench")).args(args).envs(tools.clone()).output().unwrap();
        assert!(o.status.success(), "hashfs-bench {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    };
    paper(&["paper", "--tiny", "--images", "2", "--out", s(&out), "--image-dir", s(dir.path())]);
    let bad = hashfs_bench(&["paper", "--tiny", "--out", s(&out), "nonsense"]);
    assert_ne!(code(&bad), 0);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown experiment"));
    let bad = hashfs_bench(&["paper", "--tiny", "--images", "0", "--out", s(&out), "locality"]);
    assert_ne!(code(&bad), 0);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--images"));
    for exp in
        ["locality", "fragmentation", "filesize", "iosize", "utilization", "concurrency", "pagecache", "spfs-extents"]
    {
        let text = std::fs::read_to_string(out.join(format!("{exp}.json"))).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let points = doc["points"].as_array().unwrap();
        assert!(!points.is_empty(), "{exp}: no points");
        let mappings: std::collections::BTreeSet<&str> =
            points.iter().map(|p| p["mapping"].as_str().unwrap()).collect();
        let want = match exp {
            "pagecache" => 2,
            "spfs-extents" => 4,
            _ => 6,
        };
        assert_eq!(mappings.len(), want, "{exp}: {mappings:?}");
        for p in points {
            assert!(p.get("error").is_none(), "{exp}: {p}");
            let m = p["map_cycles"]["mean"].as_f64().unwrap();
            let trials = p["map_cycles"]["trials"].as_array().unwrap();
            assert!(m.is_finite() && m > 0.0, "{exp}: {p}");
            assert!(trials.len() >= 20, "{exp}: {} trials", trials.len());
            // Two images, each kept, with different seeds (so different placements).
            assert_eq!(p["images"], serde_json::json!(2), "{exp}: {p}");
            assert_eq!(p["map_cycles"]["images"].as_array().unwrap().len(), 2, "{exp}");
        }
        let seeds = doc["config"]["image_seeds"].as_array().unwrap();
        assert!(seeds.len() == 2 && seeds[0] != seeds[1], "{exp}: {seeds:?}");
        assert!(doc["machine"]["tsc_ghz"].as_f64().unwrap() > 0.0);
    }
    // WineFS's experiments: every mapping with each allocator (HashFS: its table), the
    // mapped writes and the aging steps, finite figures, both images kept.
    for (exp, figures) in [
        ("winefs-aging", &["write_gbps", "faults_per_mib", "pmd_share", "free_aligned_share"][..]),
        ("winefs-2mib", &["map_write_us", "op_us", "faults", "pmd_share"][..]),
    ] {
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(format!("{exp}.json"))).unwrap()).unwrap();
        let points = doc["points"].as_array().unwrap();
        let configs: std::collections::BTreeSet<(String, String)> = points
            .iter()
            .map(|p| (p["mapping"].as_str().unwrap().to_string(), p["allocator"].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(configs.len(), 11, "{exp}: {configs:?}");
        for f in figures {
            let with: Vec<&serde_json::Value> = points.iter().filter(|p| p.get(*f).is_some()).collect();
            assert!(!with.is_empty(), "{exp}: no {f}");
            for p in with {
                let m = p[*f]["mean"].as_f64().unwrap();
                assert!(m.is_finite() && m >= 0.0, "{exp}: {p}");
                assert_eq!(p[*f]["images"].as_array().unwrap().len(), 2, "{exp}");
            }
        }
    }
    // ctFS on one large file: append and random read, shares of time in [0, 1] with
    // translation a part of mapping, both images kept.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ctfs-large.json")).unwrap()).unwrap();
    let points = doc["points"].as_array().unwrap();
    let ops: Vec<&str> = points.iter().map(|p| p["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["append", "rand_read"]);
    for p in points {
        let f = |k: &str| p[k]["mean"].as_f64().unwrap();
        assert!(f("ns_per_op") > 0.0, "{p}");
        assert!((0.0..=1.0).contains(&f("map_share")) && f("translate_share") >= 0.0, "{p}");
        assert!(f("translate_share") <= f("map_share") + 1e-9, "{p}");
        assert_eq!(p["translate_share"]["images"].as_array().unwrap().len(), 2, "{p}");
    }
    // ctFS's atomic writes: on ctfs untorn against relaxed, on extent-tree strict against
    // relaxed, every size aligned and not, positive times on both images; ctfs's limit.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ctfs-atomic.json")).unwrap()).unwrap();
    let points = doc["points"].as_array().unwrap();
    let kinds: std::collections::BTreeSet<(&str, &str, &str, u64)> = points
        .iter()
        .map(|p| {
            assert!(p["ms"]["mean"].as_f64().unwrap() > 0.0, "{p}");
            assert_eq!(p["ms"]["images"].as_array().unwrap().len(), 2, "{p}");
            (
                p["mapping"].as_str().unwrap(),
                p["mode"].as_str().unwrap(),
                p["align"].as_str().unwrap(),
                p["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(kinds.len(), 2 * 2 * 2 * 2, "{kinds:?}");
    assert_eq!(doc["config"]["untorn_write_max"]["ctfs"], serde_json::json!(1u64 << 30));
    // No scratch image is left behind.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "img"))
        .collect();
    assert!(left.is_empty());
    plot_smoke(&out, &dir.path().join("docs"));
    // A second run on other images (one each, numbered from 2), then both side by side.
    // ctFS Fig. 7: seven targets (three mappings in two modes through the shim, tmpfs),
    // each with load A, A-D, F, load E and E, every throughput positive on both images.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ctfs-ycsb.json")).unwrap()).unwrap();
    let points = doc["points"].as_array().unwrap();
    let targets: std::collections::BTreeSet<(&str, &str)> =
        points.iter().map(|p| (p["mapping"].as_str().unwrap(), p["mode"].as_str().unwrap())).collect();
    assert_eq!(targets.len(), 7, "{targets:?}");
    assert_eq!(points.len(), 7 * 8);
    for p in points {
        let f = &p["ops_per_s"];
        assert!(f["mean"].as_f64().is_some_and(|m| m.is_finite() && m > 0.0), "{p}");
        assert_eq!(f["images"].as_array().unwrap().len(), 2, "{p}");
    }
    let rerun = dir.path().join("rerun");
    paper(&[
        "paper",
        "--tiny",
        "--images",
        "1",
        "--first-image",
        "2",
        "--out",
        s(&rerun),
        "--image-dir",
        s(dir.path()),
    ]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(rerun.join("locality.json")).unwrap()).unwrap();
    assert_eq!(doc["first_image"], serde_json::json!(2));
    assert_ne!(doc["config"]["image_seeds"][0], seeds_of(&out)[0]);
    plot_two_runs_smoke(&out, &rerun, &dir.path().join("docs2"));
}

/// The shim and the LevelDB YCSB driver that `ctfs-ycsb` runs, built into `dir`, as the
/// environment that names them; None (a skip) without g++ or libleveldb-dev.
#[cfg(feature = "probe")]
fn ycsb_tools(dir: &Path) -> Option<Vec<(&'static str, PathBuf)>> {
    let have_gxx = Command::new("g++").arg("--version").output().is_ok_and(|o| o.status.success());
    if !have_gxx || !Path::new("/usr/include/leveldb/db.h").exists() {
        skip("bench paper's smoke run: ctfs-ycsb needs g++ and libleveldb-dev");
        return None;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let driver = dir.join("leveldb_ycsb");
    let st = Command::new("bash").arg(repo.join("apps/ycsb/build.sh")).arg(&driver).status().unwrap();
    assert!(st.success(), "building the YCSB driver");
    // The shim without the probe: the one scripts/test.sh built, else built here in this
    // build's target directory (target/probe/debug/hashfs-bench -> target/probe).
    if let Some(shim) = std::env::var_os("HASHFS_BENCH_SHIM").map(PathBuf::from).filter(|p| p.is_file()) {
        return Some(vec![("HASHFS_BENCH_SHIM", shim), ("HASHFS_BENCH_YCSB", driver)]);
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_hashfs-bench"));
    let profile = bin.parent().unwrap();
    let mut c = Command::new(env!("CARGO"));
    c.args(["build", "-q", "--workspace", "--lib", "--target-dir"]).arg(profile.parent().unwrap());
    if profile.file_name().is_some_and(|n| n == "release") {
        c.arg("--release");
    } else {
        c.args(["--profile", "test"]);
    }
    assert!(c.status().unwrap().success(), "building libhashfs_preload.so");
    let shim = profile.join("libhashfs_preload.so");
    assert!(shim.exists(), "{} not built", shim.display());
    Some(vec![("HASHFS_BENCH_SHIM", shim), ("HASHFS_BENCH_YCSB", driver)])
}

#[cfg(feature = "probe")]
fn seeds_of(results: &Path) -> Vec<serde_json::Value> {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("locality.json")).unwrap()).unwrap();
    doc["config"]["image_seeds"].as_array().unwrap().clone()
}

#[cfg(feature = "probe")]
fn python_with_matplotlib() -> Option<&'static str> {
    ["python3", "/usr/bin/python3"]
        .into_iter()
        .find(|py| Command::new(py).args(["-c", "import matplotlib"]).output().is_ok_and(|o| o.status.success()))
}

/// bench/plot.py with `--rerun`: one summary row per check with both runs' verdicts and
/// the verdict of both (the run's own or "unstable"), and a count that adds up.
#[cfg(feature = "probe")]
fn plot_two_runs_smoke(first: &Path, second: &Path, docs: &Path) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Some(py) = python_with_matplotlib() else {
        skip("the plot check: no python3 with matplotlib");
        return;
    };
    let r = Command::new(py)
        .arg(repo.join("bench/plot.py"))
        .args(["--results", s(first), "--rerun", s(second), "--docs", s(docs)])
        .arg("--intro")
        .arg(repo.join("bench/results-intro.md"))
        .output()
        .unwrap();
    assert!(r.status.success(), "plot.py failed: {}", String::from_utf8_lossy(&r.stderr));
    let md = std::fs::read_to_string(docs.join("results.md")).unwrap();
    // "Of N checks ..., S give the same verdict in both runs: A agree, D differ and I are
    // inconclusive in both; U differ between the runs".
    let start = md.find("Of ").expect("summary missing");
    let para = &md[start..start + md[start..].find("differ between the runs").expect("no count of unstable checks")];
    let nums: Vec<u64> = para.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    assert_eq!(nums.len(), 6, "{para}");
    assert_eq!(nums[2] + nums[3] + nums[4], nums[1], "{para}");
    assert_eq!(nums[1] + nums[5], nums[0], "{para}");
    let table =
        md.split("| experiment | claim | run 1 (measured) | run 2 (measured) | both runs |").nth(1).expect("no table");
    let rows: Vec<&str> = table.lines().skip(2).take_while(|l| l.starts_with("| ")).collect();
    assert!(rows.iter().all(|l| l.matches(" | ").count() == 4), "{rows:?}");
    assert_eq!(rows.len() as u64, nums[0], "one summary row per check");
    let unstable = rows.iter().filter(|l| l.ends_with("**unstable** ⚠ |")).count() as u64;
    assert_eq!(unstable, nums[5], "every unstable check flagged");
}

/// bench/plot.py draws every experiment's figure and writes results.md from the tiny run,
/// with the summary, every section and the hand-written discussion.
#[cfg(feature = "probe")]
fn plot_smoke(results: &Path, docs: &Path) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Some(py) = python_with_matplotlib() else {
        skip("the plot check: no python3 with matplotlib");
        return;
    };
    let r = Command::new(py)
        .arg(repo.join("bench/plot.py"))
        .args(["--results", s(results), "--docs", s(docs)])
        .arg("--intro")
        .arg(repo.join("bench/results-intro.md"))
        .arg("--discussion")
        .arg(repo.join("bench/results-discussion.md"))
        .output()
        .unwrap();
    assert!(r.status.success(), "plot.py failed: {}", String::from_utf8_lossy(&r.stderr));
    let md = std::fs::read_to_string(docs.join("results.md")).unwrap();
    assert!(md.contains("# Results: the papers' file-mapping evaluation"), "intro missing");
    // "Of N checks against the papers' claims, A agree, D differ and I are inconclusive":
    // three verdicts that add up, one summary row per check.
    let summary = md.lines().find(|l| l.starts_with("Of ") && l.contains("checks against the papers' claims"));
    let nums: Vec<u64> =
        summary.expect("summary missing").split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    assert_eq!(nums.len(), 4, "{summary:?}");
    assert_eq!(nums[1] + nums[2] + nums[3], nums[0], "{summary:?}");
    let rows = md.lines().filter(|l| {
        l.starts_with("| ")
            && ["**agrees**", "**differs**", "**inconclusive**"].iter().any(|v| l.ends_with(&format!("{v} |")))
    });
    assert_eq!(rows.count() as u64, nums[0], "one summary row per check");
    assert!(md.contains("Discussion (hand-written"), "discussion missing");
    assert!(!md.contains("Not in this run"), "a section has no data");
    for exp in [
        "locality",
        "fragmentation",
        "filesize",
        "iosize",
        "utilization",
        "concurrency",
        "pagecache",
        "spfs-extents",
        "winefs-aging",
        "winefs-2mib",
    ] {
        assert!(md.contains(&format!("![{exp}](results/{exp}.png)")), "{exp}: no figure in results.md");
        let png = std::fs::read(docs.join(format!("results/{exp}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{exp}: not a plot");
    }
}
