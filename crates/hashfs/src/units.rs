//! The sizes and fractions people type: `mkfs --size 1G`, `--region-load 80%`, and the
//! benchmarks' arguments (`hashfs` and `hashfs-bench` parse them alike).

/// A size such as 4096, 64K, 512M, 1G or 2GiB (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits == 0 {
        return Err(format!("not a size: {s:?} (examples: 4096, 64K, 512M, 1G)"));
    }
    let n: u64 = t[..digits].parse().map_err(|_| format!("not a size: {s:?}"))?;
    let mult = match t[digits..].to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        other => return Err(format!("unknown size unit {other:?} in {s:?}")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("size {s:?} is too large"))
}

/// A fraction strictly between 0 and 1, as one (0.8) or as a percentage (80%).
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let v = match s.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map_err(|e| format!("{s:?}: {e}"))? / 100.0,
        None => s.trim().parse::<f64>().map_err(|e| format!("{s:?}: {e}"))?,
    };
    if !(v > 0.0 && v < 1.0) {
        return Err(format!("{s:?}: a fraction must lie between 0% and 100%"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::{parse_fraction, parse_size};

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert!(parse_size("x").is_err());
        assert!(parse_size("1Q").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn fractions() {
        assert_eq!(parse_fraction("0.8"), Ok(0.8));
        assert_eq!(parse_fraction("80%"), Ok(0.8));
        assert!(parse_fraction("100%").is_err());
        assert!(parse_fraction("0").is_err());
        assert!(parse_fraction("much").is_err());
    }
}
