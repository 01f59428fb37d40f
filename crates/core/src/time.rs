//! Time as plain numbers.
//!
//! The core never reads a clock: every call that needs the time takes a [`Time`], which is
//! nanoseconds since an epoch the caller chooses (the daemon's start, or 0 in the simulator).
//! Integer nanoseconds keep the simulator exact and deterministic.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time: nanoseconds since the caller's epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    /// The epoch.
    pub const ZERO: Time = Time(0);
    /// A time later than any real one, for "never".
    pub const NEVER: Time = Time(u64::MAX);

    /// From seconds (fractional, saturating at [`Time::NEVER`]).
    pub fn from_secs_f64(s: f64) -> Time {
        if s.is_nan() || s <= 0.0 {
            return Time::ZERO;
        }
        let ns = s * 1e9;
        if ns >= u64::MAX as f64 {
            Time::NEVER
        } else {
            Time(ns as u64)
        }
    }

    /// From milliseconds.
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms * 1_000_000)
    }

    /// Seconds since the epoch.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Microseconds since the epoch (the unit of `PIPE_FEEDBACK` timestamps).
    pub fn as_micros(self) -> u64 {
        self.0 / 1_000
    }

    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Time(self.0.saturating_add(ns))
    }
}

impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub for Time {
    type Output = Duration;
    /// Saturating: a later `rhs` gives zero.
    fn sub(self, rhs: Time) -> Duration {
        self.saturating_since(rhs)
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Time::NEVER {
            write!(f, "never")
        } else {
            write!(f, "{:.6}s", self.as_secs_f64())
        }
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Time::from_millis(1500);
        assert_eq!(t.as_secs_f64(), 1.5);
        assert_eq!(t + Duration::from_millis(500), Time::from_millis(2000));
        assert_eq!(Time::ZERO - t, Duration::ZERO);
        assert_eq!(Time::NEVER + Duration::from_secs(1), Time::NEVER);
        assert_eq!(Time::from_secs_f64(-1.0), Time::ZERO);
        assert_eq!(Time::from_secs_f64(f64::INFINITY), Time::NEVER);
        assert_eq!(Time::from_secs_f64(f64::NAN), Time::ZERO);
    }
}
