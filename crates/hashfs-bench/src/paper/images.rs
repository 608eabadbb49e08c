//! Between-image statistics. Every experiment runs once per freshly formatted image, each
//! with its own seed (so HashFS hashes, and the allocator's fragmentation generator places,
//! every file differently); the points of the runs are merged here. A merged figure's mean
//! is the mean of the images' means and its 95% interval comes from the spread of those
//! means (Student's t with images - 1 degrees of freedom), so it covers the variation
//! between placements as well as the trials within each; the JSON keeps every image's
//! trials. The results page (`bench/plot.py`) judges by a 20% trimmed mean of the images'
//! means instead (`bench/estimator.py`), computed from the images kept here.

#![forbid(unsafe_code)]

use super::{mean_ci, Report};
use serde_json::{json, Map, Value};

/// The seed of image `i`: image 0 keeps the seed every run used before images were
/// repeated.
pub fn seed(i: usize) -> u64 {
    0x5EED ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A point's identity: its label fields (everything that is not a measured figure).
fn key(p: &Value) -> String {
    let Some(o) = p.as_object() else { return String::new() };
    let labels: Map<String, Value> =
        o.iter().filter(|(_, v)| !v.is_object() && !v.is_array()).map(|(k, v)| (k.clone(), v.clone())).collect();
    Value::Object(labels).to_string()
}

/// One figure of one point across images: mean of the image means, interval from their
/// spread, every image kept.
fn merge_figure(per_image: &[&Value]) -> Value {
    let means: Vec<f64> = per_image.iter().filter_map(|f| f["mean"].as_f64()).collect();
    let (mean, ci) = mean_ci(&means);
    let trials: Vec<Value> =
        per_image.iter().flat_map(|f| f["trials"].as_array().cloned().unwrap_or_default()).collect();
    let images: Vec<Value> = per_image.iter().map(|f| (*f).clone()).collect();
    json!({ "mean": mean, "ci95": ci, "trials": trials, "images": images })
}

/// Merges one point measured on several images.
fn merge_point(per_image: &[&Value]) -> Value {
    let first = per_image[0];
    if let Some(err) = per_image.iter().find(|p| p.get("error").is_some()) {
        return (*err).clone(); // a point that failed on any image is reported as failed
    }
    let mut out = Map::new();
    for (k, v) in first.as_object().into_iter().flatten() {
        let merged = if v.get("mean").is_some() && v.get("trials").is_some() {
            let figs: Vec<&Value> = per_image.iter().map(|p| &p[k]).collect();
            merge_figure(&figs)
        } else {
            v.clone()
        };
        out.insert(k.clone(), merged);
    }
    out.insert("images".into(), json!(per_image.len()));
    Value::Object(out)
}

/// Merges the reports of one experiment run on `reports.len()` images numbered from
/// `first`, in point order of the first image (a point some image lacks is merged over the
/// images that have it).
pub fn merge(reports: Vec<Report>, first: usize) -> Report {
    let n = reports.len();
    let mut order: Vec<String> = Vec::new();
    let mut by_key: std::collections::HashMap<String, Vec<&Value>> = std::collections::HashMap::new();
    for r in &reports {
        for p in &r.points {
            let k = key(p);
            if !by_key.contains_key(&k) {
                order.push(k.clone());
            }
            by_key.entry(k).or_default().push(p);
        }
    }
    let points = order.iter().map(|k| merge_point(&by_key[k])).collect();
    let mut config = reports[0].config.clone();
    config["images"] = json!(n);
    config["image_seeds"] = json!((first..first + n).map(seed).collect::<Vec<_>>());
    config["per_image"] = Value::Array(reports.iter().map(|r| r.config.clone()).collect());
    Report { config, scale_note: reports[0].scale_note.clone(), points }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(mapping: &str, trials: &[f64]) -> Value {
        let (m, ci) = mean_ci(trials);
        json!({ "mapping": mapping, "op": "rand_read", "map_cycles": { "mean": m, "ci95": ci, "trials": trials } })
    }

    fn report(points: Vec<Value>) -> Report {
        Report { config: json!({ "trials": 3 }), scale_note: String::new(), points }
    }

    /// Three images whose trials agree within each image but whose means differ: the
    /// merged interval is the between-image one (wide), not the within-image one (narrow).
    #[test]
    fn the_interval_covers_the_spread_between_images() {
        let r = merge(
            vec![
                report(vec![pt("hashfs", &[100.0, 101.0, 99.0])]),
                report(vec![pt("hashfs", &[200.0, 201.0, 199.0])]),
                report(vec![pt("hashfs", &[150.0, 151.0, 149.0])]),
            ],
            0,
        );
        let f = &r.points[0]["map_cycles"];
        assert_eq!(f["mean"].as_f64(), Some(150.0));
        let (_, within) = mean_ci(&[100.0, 101.0, 99.0]);
        let ci = f["ci95"].as_f64().unwrap();
        // sd of (100, 200, 150) = 50; t(2) = 4.303; 4.303 * 50 / sqrt(3) = 124.2
        assert!((ci - 124.2).abs() < 0.5, "{ci}");
        assert!(ci > 10.0 * within);
        assert_eq!(f["trials"].as_array().unwrap().len(), 9);
        assert_eq!(f["images"].as_array().unwrap().len(), 3);
        assert_eq!(r.points[0]["images"], json!(3));
        assert_eq!(r.config["images"], json!(3));
        assert_eq!(r.config["image_seeds"][0], json!(0x5EED));
    }

    /// Points are matched by their labels, not their position.
    #[test]
    fn points_are_matched_by_label() {
        let r = merge(
            vec![
                report(vec![pt("hashfs", &[1.0, 1.0]), pt("cuckoo", &[10.0, 10.0])]),
                report(vec![pt("cuckoo", &[30.0, 30.0]), pt("hashfs", &[3.0, 3.0])]),
            ],
            0,
        );
        assert_eq!(r.points[0]["mapping"], json!("hashfs"));
        assert_eq!(r.points[0]["map_cycles"]["mean"].as_f64(), Some(2.0));
        assert_eq!(r.points[1]["map_cycles"]["mean"].as_f64(), Some(20.0));
    }

    /// A second run numbered from another image records that image's seeds.
    #[test]
    fn a_later_first_image_records_its_own_seeds() {
        let r = merge(vec![report(vec![pt("hashfs", &[1.0])]), report(vec![pt("hashfs", &[2.0])])], 3);
        assert_eq!(r.config["image_seeds"], json!([seed(3), seed(4)]));
        assert_ne!(seed(3), seed(0));
    }

    #[test]
    fn seeds_differ_between_images() {
        let s: std::collections::HashSet<u64> = (0..5).map(seed).collect();
        assert_eq!(s.len(), 5);
    }

    /// scripts/bench-paper.sh's full run names its experiments in four lists (five images
    /// per point, ten, twenty, three): every experiment must be in exactly one.
    #[test]
    fn the_full_run_script_names_every_experiment_once() {
        let script = include_str!("../../../../scripts/bench-paper.sh");
        let list = |var: &str| -> Vec<String> {
            let line = script.lines().find(|l| l.starts_with(&format!("{var}=("))).expect("the list");
            line[var.len() + 2..line.len() - 1].split_whitespace().map(String::from).collect()
        };
        let mut named: Vec<String> =
            list("FIVE").into_iter().chain(list("TEN")).chain(list("TWENTY")).chain(list("REST")).collect();
        named.sort();
        let mut all: Vec<String> = super::super::EXPERIMENTS.iter().map(|(n, _)| n.to_string()).collect();
        all.sort();
        assert_eq!(named, all);
    }
}
