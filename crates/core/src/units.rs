//! Parsers for human-written quantities (`10MB`, `8` Mbps, `50ms`), shared by the command
//! line, the configuration files and the simulator's scenarios.

use std::time::Duration;

/// A value that does not parse, with a message that says what is expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(pub String);

fn err<T>(msg: String) -> Result<T, UnitError> {
    Err(UnitError(msg))
}

/// Parses a size: `10MB` (10^6), `512KB` (10^3), `1GB`, `4MiB` (2^20), `64KiB`, or plain bytes.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let units: [(&str, f64); 8] = [
        ("gib", (1u64 << 30) as f64),
        ("mib", (1u64 << 20) as f64),
        ("kib", 1024.0),
        ("gb", 1e9),
        ("mb", 1e6),
        ("kb", 1e3),
        ("b", 1.0),
        ("", 1.0),
    ];
    for (u, mult) in units {
        if let Some(num) = lower.strip_suffix(u) {
            if let Ok(v) = num.trim().parse::<f64>() {
                if v.is_finite() && v >= 0.0 && v * mult < 1e15 {
                    return Ok((v * mult).round() as u64);
                }
            }
        }
    }
    err(format!(
        "bad size {s:?}: use a number with an optional unit B, KB, MB, GB (powers of 10) or KiB, MiB, GiB"
    ))
}

/// Parses a rate in Mbps: `8`, `8Mbps`, `500kbps`, `1.5Gbps`, or `down` (0).
pub fn parse_rate_bps(s: &str) -> Result<f64, UnitError> {
    let t = s.trim().to_ascii_lowercase();
    if t == "down" || t == "off" {
        return Ok(0.0);
    }
    let (num, mult) = if let Some(n) = t.strip_suffix("gbps") {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix("mbps") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix("kbps") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("bps") {
        (n, 1.0)
    } else {
        (t.as_str(), 1e6)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * mult),
        _ => err(format!(
            "bad rate {s:?}: give Mbps as a number (e.g. 8 or 0.5), a unit (500kbps, 1Gbps), or 'down'"
        )),
    }
}

/// Parses a duration: `50ms`, `2s`, `1.5s`, `250us`, `1m`.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        return err(format!("bad duration {s:?}: add a unit, e.g. 50ms or 2s"));
    };
    match num.trim().parse::<f64>() {
        Ok(v) if (0.0..1e9).contains(&v) => Ok(Duration::from_secs_f64(v * mult)),
        _ => err(format!("bad duration {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("10MB").unwrap(), 10_000_000);
        assert_eq!(parse_size("512KB").unwrap(), 512_000);
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_size("1.5 kb").unwrap(), 1500);
        assert_eq!(parse_size("123").unwrap(), 123);
        assert!(parse_size("ten").unwrap_err().0.contains("MiB"));
        assert!(parse_size("-1MB").is_err());
    }

    #[test]
    fn rates_and_durations() {
        assert_eq!(parse_rate_bps("8").unwrap(), 8e6);
        assert_eq!(parse_rate_bps("500kbps").unwrap(), 5e5);
        assert_eq!(parse_rate_bps("down").unwrap(), 0.0);
        assert!(parse_rate_bps("fast").is_err());
        assert_eq!(parse_duration("50ms").unwrap(), Duration::from_millis(50));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("50").unwrap_err().0.contains("unit"));
    }
}
