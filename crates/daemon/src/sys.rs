//! Linux socket state the scheduler needs: TCP_INFO, SIOCOUTQ, TCP_NOTSENT_LOWAT, and
//! SO_ORIGINAL_DST for transparent interception.
//!
//! This is the only module with `unsafe`: each block is one `getsockopt`/`setsockopt`/`ioctl`
//! on a file descriptor the caller owns, with buffers sized from the types written into.
#![allow(unsafe_code)]

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

use mpbond_core::PacketFill;

/// `struct tcp_info` from `<linux/tcp.h>`, up to `tcpi_snd_wnd`. The kernel fills as much as
/// it knows and reports the length; older kernels leave the tail zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct RawTcpInfo {
    /// state, ca_state, retransmits, probes, backoff, options, wscales, and a byte whose bit 0
    /// is `tcpi_delivery_rate_app_limited`.
    head: [u8; 8],
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
}

/// The fields of TCP_INFO that mpbond uses, in plain units.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TcpInfo {
    /// Smoothed RTT, microseconds.
    pub rtt_us: u32,
    /// Minimum RTT seen, microseconds.
    pub min_rtt_us: u32,
    /// Congestion window, bytes (cwnd × MSS).
    pub cwnd_bytes: u64,
    /// Bytes in flight (unacked × MSS).
    pub unacked_bytes: u64,
    /// Bytes written and not yet sent.
    pub notsent_bytes: u64,
    /// Delivery rate, bytes per second.
    pub delivery_rate: u64,
    /// The delivery-rate sample was application-limited.
    pub app_limited: bool,
    /// Bytes acknowledged since the connection opened.
    pub bytes_acked: u64,
    /// Bytes received since the connection opened.
    pub bytes_received: u64,
    /// Segments sent and retransmitted.
    pub segs_out: u32,
    /// Total retransmissions.
    pub total_retrans: u32,
    /// Milliseconds since the last ACK was received.
    pub last_ack_recv_ms: u32,
    /// The congestion window is below the slow-start threshold, so it still doubles every
    /// round trip (the kernel reports a threshold of 0 during the initial slow start).
    #[serde(default)]
    pub slow_start: bool,
    /// Recovering from a loss: `tcpi_ca_state` is Recovery or Loss (the queue guard of a
    /// PS-Path stands aside then, `QueueGuard::for_ps_path`).
    #[serde(default)]
    pub recovering: bool,
    /// Packets delivered since the connection opened (`tcpi_delivered`), for [`PacketFill`].
    /// It counts SACKed packets as soon as they are SACKed, before the cumulative ACK (and
    /// `bytes_acked`) covers them.
    #[serde(default)]
    pub delivered: u32,
    /// Packets SACKed and not yet cumulatively acknowledged (`tcpi_sacked`).
    #[serde(default)]
    pub sacked: u32,
    /// The same in bytes (sacked × MSS), part of `unacked_bytes`.
    #[serde(default)]
    pub sacked_bytes: u64,
    /// The sender's MSS, bytes (`tcpi_snd_mss`).
    #[serde(default)]
    pub mss: u32,
    /// Segments carrying data that the kernel took in since the connection opened
    /// (`tcpi_data_segs_in`), out of order and repeated ones included: proof the peer is
    /// sending even while a hole keeps every byte from the application.
    #[serde(default)]
    pub data_segs_in: u32,
}

impl TcpInfo {
    /// Corrects the readings the kernel counts in packets × MSS (delivery rate, congestion
    /// window, bytes in flight) for packets shorter than the MSS, with `fill` from a
    /// [`PacketFill`] kept for the socket (why: its doc comment).
    pub fn with_fill(mut self, fill: &mut PacketFill, now: mpbond_core::Time) -> Self {
        // Packets under the cumulative ACK, to match `bytes_acked`: during loss recovery
        // SACKed packets are delivered but not acknowledged, and counting them made a
        // window of no acknowledged bytes and many packets, a fill of 0.05 and a pipe read
        // at a twentieth of its rate (docs/evaluation.md, item 15).
        let f = fill.observe(
            now,
            self.rtt_us as f64 / 1e6,
            self.bytes_acked,
            self.delivered.wrapping_sub(self.sacked),
            self.mss,
        );
        let scale = |v: u64| (v as f64 * f) as u64;
        self.delivery_rate = scale(self.delivery_rate);
        self.cwnd_bytes = scale(self.cwnd_bytes);
        self.unacked_bytes = scale(self.unacked_bytes);
        self.sacked_bytes = scale(self.sacked_bytes).min(self.unacked_bytes);
        self
    }

    /// Bytes the path still has to carry across its bottleneck: those not sent yet and
    /// those in flight, less the packets the receiver has SACKed. This is B_s of PAD
    /// (MPBond §4.3.2) as the kernel knows it. `tcpi_unacked` counts SACKed packets until
    /// the cumulative ACK covers them, so during a loss recovery a path's queue read up to
    /// a congestion window too long: in experiment 05 the PS-Path, in recovery from its
    /// queue's overflow at the moment the HS-Path fell idle, read 308 KB where about 170 KB
    /// were still to cross it, and PAMS sent the helper 85 KB too many (docs/evaluation.md,
    /// "A tie PAMS gets wrong").
    pub fn to_deliver(&self) -> u64 {
        self.unacked_bytes.saturating_sub(self.sacked_bytes) + self.notsent_bytes
    }

    /// Fraction of segments retransmitted.
    pub fn loss_rate(&self) -> f64 {
        if self.segs_out == 0 {
            0.0
        } else {
            (self.total_retrans as f64 / self.segs_out as f64).min(1.0)
        }
    }
}

fn getsockopt<T: Default>(fd: &impl AsRawFd, level: i32, name: i32) -> io::Result<T> {
    let mut v = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is a valid, writable `T` of `len` bytes, and the kernel writes at most `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut v as *mut T).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn setsockopt_int(fd: &impl AsRawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: a readable `c_int` and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const i32).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads TCP_INFO.
pub fn tcp_info(fd: &impl AsRawFd) -> io::Result<TcpInfo> {
    let r: RawTcpInfo = getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO)?;
    let mss = r.snd_mss.max(1) as u64;
    Ok(TcpInfo {
        rtt_us: r.rtt,
        min_rtt_us: r.min_rtt,
        cwnd_bytes: r.snd_cwnd as u64 * mss,
        unacked_bytes: r.unacked as u64 * mss,
        notsent_bytes: r.notsent_bytes as u64,
        delivery_rate: r.delivery_rate,
        app_limited: r.head[7] & 1 == 1,
        bytes_acked: r.bytes_acked,
        bytes_received: r.bytes_received,
        segs_out: r.segs_out,
        total_retrans: r.total_retrans,
        last_ack_recv_ms: r.last_ack_recv,
        slow_start: r.snd_ssthresh == 0 || r.snd_cwnd < r.snd_ssthresh,
        // TCP_CA_Recovery = 3, TCP_CA_Loss = 4 (include/net/tcp.h's tcp_ca_state).
        recovering: r.head[1] >= 3,
        delivered: r.delivered,
        sacked: r.sacked,
        sacked_bytes: r.sacked as u64 * mss,
        mss: r.snd_mss,
        data_segs_in: r.data_segs_in,
    })
}

/// Bytes in the socket's send queue, not sent plus not acknowledged (SIOCOUTQ).
pub fn outq(fd: &impl AsRawFd) -> io::Result<u64> {
    let mut v: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one c_int through the pointer.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &mut v as *mut libc::c_int) };
    if rc == 0 {
        Ok(v.max(0) as u64)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets TCP_NOTSENT_LOWAT: the socket reports writable only while fewer than `bytes` are
/// waiting to be sent, so data stays in user space, where the scheduler can still move it,
/// until the kernel is about to need it.
pub fn set_notsent_lowat(fd: &impl AsRawFd, bytes: u32) -> io::Result<()> {
    setsockopt_int(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        bytes.min(i32::MAX as u32) as i32,
    )
}

/// Turns on the kernel's TCP pacing (SO_MAX_PACING_RATE with no cap that matters): the
/// socket then sends at about 2 x cwnd/srtt in slow start and 1.2 x in congestion avoidance
/// instead of in line-rate bursts, whatever its congestion control. Any value but "unset"
/// (all ones) switches pacing on; this one caps nothing.
pub fn set_pacing(fd: &impl AsRawFd) -> io::Result<()> {
    set_pacing_cap(fd, crate::queue_guard::NO_CAP)
}

/// Caps the socket's pacing rate at `rate` bytes per second (SO_MAX_PACING_RATE; with
/// [`crate::queue_guard::NO_CAP`], pacing stays on and nothing is capped).
pub fn set_pacing_cap(fd: &impl AsRawFd, rate: u64) -> io::Result<()> {
    setsockopt_raw(
        fd,
        libc::SOL_SOCKET,
        libc::SO_MAX_PACING_RATE,
        &rate.to_ne_bytes(),
    )
}

/// Whether `name` can be a kernel congestion control name: 1 to 15 letters, digits or `_`
/// (TCP_CA_NAME_MAX is 16 with the NUL). Checked before the name reaches a sysctl path,
/// a module name or a socket option.
pub fn is_congestion_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Sets the socket's congestion control (TCP_CONGESTION), e.g. `cubic` or `bbr`.
pub fn set_congestion(fd: &impl AsRawFd, name: &str) -> io::Result<()> {
    setsockopt_raw(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_bytes())
}

/// Initialises a CUBIC socket's congestion control again, as at the connection's start, by
/// switching it to Reno and back: the kernel keeps its state when asked for the control it
/// already has, and clears it on a change (`tcp_reinit_congestion_control`). The window and
/// `ssthresh` are the socket's and do not change. Returns whether it restarted: other controls
/// are left alone (BBR keeps a model of the path that a restart would throw away).
/// Reno is built in and always allowed, so this needs no privilege.
pub fn restart_congestion(fd: &impl AsRawFd) -> io::Result<bool> {
    if congestion(fd)? != "cubic" {
        return Ok(false);
    }
    set_congestion(fd, "reno")?;
    set_congestion(fd, "cubic")?;
    Ok(true)
}

/// The socket's congestion control.
pub fn congestion(fd: &impl AsRawFd) -> io::Result<String> {
    let raw: [u8; 16] = getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION)?;
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    Ok(String::from_utf8_lossy(&raw[..end]).into_owned())
}

fn setsockopt_raw(fd: &impl AsRawFd, level: i32, name: i32, value: &[u8]) -> io::Result<()> {
    // SAFETY: `value` is readable for its length, which is what the kernel is told.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            value.as_ptr().cast(),
            value.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// True when the kernel would report the socket writable now. For a TCP socket with
/// TCP_NOTSENT_LOWAT that means fewer than the mark's bytes wait to be sent. A `poll()` that
/// finds it not writable also marks the socket (SOCK_NOSPACE) so that the kernel raises a
/// write-space event as soon as it is, which is what an edge-triggered waiter needs.
pub fn poll_writable(fd: &impl AsRawFd) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let rc = unsafe { libc::poll(&mut p, 1, 0) };
    rc > 0 && p.revents & libc::POLLOUT != 0
}

/// The destination a connection had before an nftables `redirect` (SO_ORIGINAL_DST), for
/// transparent interception.
pub fn original_dst(fd: &impl AsRawFd, ipv6: bool) -> io::Result<SocketAddr> {
    if ipv6 {
        // IP6T_SO_ORIGINAL_DST = 80
        let a: SockAddrIn6 = getsockopt(fd, libc::SOL_IPV6, 80)?;
        Ok(SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from(a.0.sin6_addr.s6_addr),
            u16::from_be(a.0.sin6_port),
            0,
            0,
        )))
    } else {
        let a: SockAddrIn = getsockopt(fd, libc::SOL_IP, libc::SO_ORIGINAL_DST)?;
        Ok(SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(a.0.sin_addr.s_addr)),
            u16::from_be(a.0.sin_port),
        )))
    }
}

struct SockAddrIn(libc::sockaddr_in);
impl Default for SockAddrIn {
    fn default() -> Self {
        // SAFETY: sockaddr_in is plain old data; all-zero is a valid value.
        SockAddrIn(unsafe { std::mem::zeroed() })
    }
}

struct SockAddrIn6(libc::sockaddr_in6);
impl Default for SockAddrIn6 {
    fn default() -> Self {
        // SAFETY: sockaddr_in6 is plain old data; all-zero is a valid value.
        SockAddrIn6(unsafe { std::mem::zeroed() })
    }
}

/// Milliseconds on a process-wide monotonic clock (for timestamps shared between tasks).
pub fn mono_ms() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    EPOCH
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
}

/// Resident set size of this process in bytes, from /proc/self/statm.
pub fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(1) as u64)
}

/// CPU time (user + system) this process has used, in seconds.
pub fn process_cpu_seconds() -> f64 {
    clock_seconds(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time the calling thread has used, in seconds, to the nanosecond and up to date
/// (schedstat in `/proc` lags by up to a scheduler tick for a thread that is running).
pub fn thread_cpu_seconds() -> f64 {
    clock_seconds(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `clock_gettime(clock)` in seconds, or 0 when the clock cannot be read.
fn clock_seconds(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc == 0 {
        ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
    } else {
        0.0
    }
}

/// Keeps glibc's allocator from handing buffer memory back to the kernel on every free.
///
/// The daemons allocate and free buffers of tens of KiB at Gbit/s across threads. With the
/// default (dynamic) thresholds glibc kept trimming its per-thread arenas with `madvise` and
/// faulting the pages back in: 108 `madvise` calls in 4 s on the primary, and about 20% more
/// CPU per GB than with this fixed setting (docs/performance.md). Idle memory is unchanged
/// (fresh pages are still only committed when touched). A no-op off glibc.
pub fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes allocator parameters; it is called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn pacing_and_congestion_control_are_set_per_socket() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_pacing(&c).unwrap();
        let cap: u64 = getsockopt(&c, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE).unwrap();
        assert_eq!(cap, u64::MAX - 1, "pacing on, no cap");
        set_pacing_cap(&c, 1_500_000).unwrap();
        let cap: u64 = getsockopt(&c, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE).unwrap();
        assert_eq!(cap, 1_500_000, "capped (the queue guard)");
        // Reno is built into every kernel and is never the default.
        set_congestion(&c, "reno").unwrap();
        assert_eq!(congestion(&c).unwrap(), "reno");
        let e = set_congestion(&c, "no-such-cc").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn tcp_info_and_outq_on_a_loopback_connection() {
        assert!(size_of::<RawTcpInfo>() >= 232);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        set_notsent_lowat(&c, 16384).unwrap();
        c.write_all(&[1u8; 100_000]).unwrap();
        let mut buf = vec![0u8; 100_000];
        s.read_exact(&mut buf).unwrap();
        // Once everything is acknowledged, bytes_acked counts the payload plus the SYN: this
        // checks the struct layout against the kernel's.
        let mut info = tcp_info(&c).unwrap();
        for _ in 0..100 {
            if info.bytes_acked == 100_001 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            info = tcp_info(&c).unwrap();
        }
        assert_eq!(info.bytes_acked, 100_001);
        assert_eq!((info.notsent_bytes, info.unacked_bytes), (0, 0));
        assert!(info.rtt_us > 0 && info.min_rtt_us > 0);
        assert!(info.cwnd_bytes > 0 && info.delivery_rate > 0);
        assert_eq!(outq(&c).unwrap(), 0);
        // Data segments in: the receiver took in the payload, the sender only ACKs.
        assert!(tcp_info(&s).unwrap().data_segs_in > 0);
        assert_eq!(info.data_segs_in, 0);
        assert!(rss_bytes().unwrap() > 0);
        assert!(process_cpu_seconds() > 0.0);
        // This thread's own time is part of the process's and moves while it works.
        let t0 = thread_cpu_seconds();
        assert!(t0 > 0.0, "the thread's CPU clock reads");
        let mut x = 1u64;
        while thread_cpu_seconds() < t0 + 0.002 {
            x = std::hint::black_box(x.wrapping_mul(3).wrapping_add(1));
        }
        assert!(thread_cpu_seconds() <= process_cpu_seconds());
        // Not a redirected connection: the kernel has no original destination.
        assert!(original_dst(&s, false).is_err());
    }

    /// During a loss recovery the SACKed packets have crossed the path: what is still to
    /// deliver is the unsent bytes and the unSACKed ones in flight, and the packet fill
    /// scales both counts alike.
    #[test]
    fn sacked_packets_are_not_still_to_deliver() {
        let t = TcpInfo {
            unacked_bytes: 200 * 1448,
            sacked_bytes: 90 * 1448,
            notsent_bytes: 20_000,
            ..TcpInfo::default()
        };
        assert_eq!(t.to_deliver(), 110 * 1448 + 20_000);
        // A reading whose SACK count exceeds what is in flight (counters read apart) is
        // clamped, never negative.
        let odd = TcpInfo {
            unacked_bytes: 10,
            sacked_bytes: 50,
            ..TcpInfo::default()
        };
        assert_eq!(odd.to_deliver(), 0);
        // Half-full packets: the fill halves both.
        let mut fill = mpbond_core::PacketFill::new();
        let mut r = TcpInfo {
            rtt_us: 5_000,
            mss: 1448,
            unacked_bytes: 100 * 1448,
            sacked_bytes: 40 * 1448,
            ..TcpInfo::default()
        };
        let ms = mpbond_core::Time::from_millis;
        r = r.with_fill(&mut fill, ms(0));
        r.bytes_acked += 50 * 724;
        r.delivered += 50;
        r.unacked_bytes = 100 * 1448;
        r.sacked_bytes = 40 * 1448;
        let scaled = r.with_fill(&mut fill, ms(10));
        assert_eq!(scaled.to_deliver(), 60 * 724);
    }
}
