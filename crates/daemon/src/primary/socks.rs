//! The SOCKS5 front end (RFC 1928): `CONNECT` only, no authentication, host names passed to the
//! proxy unresolved so the primary's DNS never leaks (`curl --socks5-hostname` works as is).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use mpbond_proto::{Destination, Host, Reason};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use super::Current;
use crate::session::streams_reply;
use crate::session::Event;

/// Time a client has to finish the SOCKS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a SOCKS request was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SocksError {
    /// Not SOCKS version 5.
    #[error("not a SOCKS5 client (version byte {0})")]
    Version(u8),
    /// The client offers no method we accept.
    #[error("client offers no 'no authentication' method")]
    NoMethod,
    /// BIND or UDP ASSOCIATE.
    #[error("command {0} not supported (only CONNECT)")]
    Command(u8),
    /// Unknown address type or bad host name.
    #[error("bad address: {0}")]
    Address(&'static str),
    /// Socket error or EOF.
    #[error("connection ended during the handshake")]
    Io,
}

/// Reads the greeting and request; returns the destination. Writes the method selection and,
/// on failure, the error reply.
pub async fn handshake(sock: &mut TcpStream) -> Result<Destination, SocksError> {
    let io = |_| SocksError::Io;
    let mut h = [0u8; 2];
    sock.read_exact(&mut h).await.map_err(io)?;
    if h[0] != 5 {
        return Err(SocksError::Version(h[0]));
    }
    let mut methods = vec![0u8; h[1] as usize];
    sock.read_exact(&mut methods).await.map_err(io)?;
    if !methods.contains(&0) {
        let _ = sock.write_all(&[5, 0xFF]).await;
        return Err(SocksError::NoMethod);
    }
    sock.write_all(&[5, 0]).await.map_err(io)?;
    let mut r = [0u8; 4];
    sock.read_exact(&mut r).await.map_err(io)?;
    if r[0] != 5 {
        return Err(SocksError::Version(r[0]));
    }
    let reply = |code: u8| [5, code, 0, 1, 0, 0, 0, 0, 0, 0];
    if r[1] != 1 {
        let _ = sock.write_all(&reply(7)).await;
        return Err(SocksError::Command(r[1]));
    }
    let host = match r[3] {
        1 => {
            let mut a = [0u8; 4];
            sock.read_exact(&mut a).await.map_err(io)?;
            Host::V4(Ipv4Addr::from(a))
        }
        4 => {
            let mut a = [0u8; 16];
            sock.read_exact(&mut a).await.map_err(io)?;
            Host::V6(Ipv6Addr::from(a))
        }
        3 => {
            let n = sock.read_u8().await.map_err(io)? as usize;
            let mut name = vec![0u8; n];
            sock.read_exact(&mut name).await.map_err(io)?;
            if n == 0 || !name.iter().all(|c| c.is_ascii_graphic()) {
                let _ = sock.write_all(&reply(8)).await;
                return Err(SocksError::Address(
                    "host name is empty or not printable ASCII",
                ));
            }
            Host::Name(String::from_utf8(name).map_err(|_| SocksError::Address("host name"))?)
        }
        _ => {
            let _ = sock.write_all(&reply(8)).await;
            return Err(SocksError::Address("unknown address type"));
        }
    };
    let port = sock.read_u16().await.map_err(io)?;
    Ok(Destination { host, port })
}

/// Accepts SOCKS clients and hands their connections to the current session.
pub async fn serve(
    listener: TcpListener,
    current: Current,
    max_pending: usize,
    mut stop: watch::Receiver<bool>,
) {
    let permits = std::sync::Arc::new(Semaphore::new(max_pending.max(1)));
    loop {
        let (mut sock, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "SOCKS accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "too many SOCKS handshakes in progress; refusing");
            continue;
        };
        let current = current.clone();
        tokio::spawn(async move {
            let _ = sock.set_nodelay(true);
            let dest = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&mut sock)).await {
                Ok(Ok(d)) => d,
                Ok(Err(e)) => {
                    tracing::info!(%peer, error = %e, "SOCKS request refused");
                    return;
                }
                Err(_) => return,
            };
            drop(permit);
            let handle = current.borrow().clone();
            match handle {
                Some(h) => {
                    let _ =
                        h.tx.send(Event::Open {
                            dest,
                            sock,
                            socks: true,
                        })
                        .await;
                }
                None => {
                    tracing::warn!(%dest, "no session with the proxy; refusing");
                    let _ = sock
                        .write_all(&streams_reply(Err(Reason::PATH_FAILED)))
                        .await;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(client: Vec<u8>) -> (Result<Destination, SocksError>, Vec<u8>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let c = tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(&client).await.unwrap();
            s.shutdown().await.unwrap();
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got).await;
            got
        });
        let (mut s, _) = l.accept().await.unwrap();
        let r = handshake(&mut s).await;
        drop(s);
        (r, c.await.unwrap())
    }

    #[tokio::test]
    async fn connect_with_host_name() {
        let mut m = vec![5, 1, 0, 5, 1, 0, 3, 11];
        m.extend_from_slice(b"example.org");
        m.extend_from_slice(&443u16.to_be_bytes());
        let (r, reply) = run(m).await;
        assert_eq!(
            r.unwrap(),
            Destination {
                host: Host::Name("example.org".into()),
                port: 443
            }
        );
        assert_eq!(reply, vec![5, 0]);
    }

    #[tokio::test]
    async fn refusals_are_specific() {
        assert_eq!(run(vec![4, 1, 0]).await.0, Err(SocksError::Version(4)));
        let (r, reply) = run(vec![5, 1, 2]).await;
        assert_eq!((r, reply), (Err(SocksError::NoMethod), vec![5, 0xFF]));
        let (r, reply) = run(vec![5, 1, 0, 5, 2, 0, 1, 1, 2, 3, 4, 0, 80]).await;
        assert_eq!(r, Err(SocksError::Command(2)));
        assert_eq!(reply[2 + 1], 7, "command not supported");
        assert_eq!(
            run(vec![5, 1, 0, 5, 1, 0, 9]).await.0,
            Err(SocksError::Address("unknown address type"))
        );
        assert_eq!(run(vec![5, 1, 0, 5, 1]).await.0, Err(SocksError::Io));
    }
}
