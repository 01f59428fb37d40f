//! Reason codes shared by `CLOSE`, `STREAM_RST` and `SUBFLOW_CLOSE` (docs/protocol.md, "Reason
//! codes").

use std::fmt;

/// A reason code on the wire.
///
/// It is a newtype over `u16` rather than an enum so that a code from a newer peer is carried
/// and printed as a number instead of being an error.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reason(pub u16);

macro_rules! reasons {
    ($($name:ident = $code:expr, $text:expr;)*) => {
        impl Reason {
            $(
                #[doc = $text]
                pub const $name: Reason = Reason($code);
            )*

            /// The code's name, or `None` for a code this version does not know.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($code => Some(stringify!($name)),)*
                    _ => None,
                }
            }

            /// A short human description, for logs and error messages.
            pub fn description(self) -> &'static str {
                match self.0 {
                    $($code => $text,)*
                    _ => "unknown reason code",
                }
            }
        }
    };
}

reasons! {
    NO_ERROR = 0, "orderly close";
    PROTOCOL_VIOLATION = 1, "frame not allowed in this state";
    MALFORMED = 2, "frame body does not match its layout";
    FRAME_TOO_LARGE = 3, "frame body longer than the maximum";
    UNKNOWN_FRAME = 4, "unknown mandatory frame type";
    VERSION_MISMATCH = 5, "no common protocol version";
    UNAUTHORIZED = 6, "device or ticket not allowed";
    LIMIT_REACHED = 7, "a cap on sessions, streams or buffered bytes was hit";
    FLOW_CONTROL = 8, "data beyond the advertised window";
    FINAL_SIZE = 9, "inconsistent final size";
    CONNECT_FAILED = 10, "the proxy could not reach the origin";
    DNS_FAILED = 11, "the host name did not resolve";
    TIMEOUT = 12, "the peer or path stalled";
    SHUTTING_DOWN = 13, "the daemon is stopping";
    CANCELLED = 14, "the application closed the stream abnormally";
    PATH_FAILED = 15, "a subflow's path failed";
    INTERNAL = 16, "internal error";
}

impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "Reason({})", self.0),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({})", self.description()),
            None => write!(f, "reason code {}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_codes_print() {
        assert_eq!(Reason::TIMEOUT.name(), Some("TIMEOUT"));
        assert_eq!(format!("{}", Reason(9999)), "reason code 9999");
        assert_eq!(format!("{:?}", Reason::FLOW_CONTROL), "FLOW_CONTROL");
        assert!(format!("{}", Reason::DNS_FAILED).contains("did not resolve"));
    }
}
