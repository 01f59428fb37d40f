//! Network namespaces and the commands that configure them, with clean-up that runs on
//! success, on error and on Ctrl-C (the owner drops the [`Namespaces`] guard; processes are
//! killed first so each namespace can go).

use std::process::Command;

/// Errors setting up the testbed.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// A command failed.
    #[error("`{cmd}` failed: {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// What it printed.
        stderr: String,
    },
    /// A command could not start.
    #[error("cannot run `{cmd}`: {source}")]
    Spawn {
        /// The command line.
        cmd: String,
        /// Why.
        source: std::io::Error,
    },
    /// The scenario's congestion control is not one this kernel has.
    #[error(
        "congestion control {cc:?} is not available here (the kernel has: {available}); \
         set `cc` in the scenario to one of those, or load its module (modprobe tcp_{cc})"
    )]
    Congestion {
        /// What the scenario asked for.
        cc: String,
        /// `net.ipv4.tcp_available_congestion_control`.
        available: String,
    },
    /// The kernel has the congestion control, but only the initial network namespace may
    /// make it a default and it is not in the host's allowed list, which this process could
    /// not extend.
    #[error(
        "congestion control {cc:?} is available but not allowed in network namespaces \
         (net.ipv4.tcp_allowed_congestion_control is \"{allowed}\") and adding it failed: \
         {reason}; as root run: sysctl -w net.ipv4.tcp_allowed_congestion_control=\"{allowed} {cc}\""
    )]
    CongestionNotAllowed {
        /// What the scenario asked for.
        cc: String,
        /// `net.ipv4.tcp_allowed_congestion_control`.
        allowed: String,
        /// Why it could not be added.
        reason: String,
    },
    /// Other I/O.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

fn cc_list(path: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_string()
}

const CUBIC_HYSTART: &str = "/sys/module/tcp_cubic/parameters/hystart";

/// The testbed's congestion control as a report names it: for CUBIC, with whether its
/// HyStart is on. HyStart (the slow-start exit on rising delay or ACK trains) is a
/// parameter of the kernel's CUBIC module, the same for every namespace and no socket
/// option, so the lab cannot pin it as it pins `tcp_rmem`; and it moves results: turned off
/// host-wide, it saved mpbond and kibbutz about 5-6% of their time over 10a's LTE stretches
/// (docs/evaluation.md, 10a). The report says which it was.
pub fn congestion_label(cc: &str) -> String {
    let hystart = std::fs::read_to_string(CUBIC_HYSTART).ok();
    label_with_hystart(cc, hystart.as_deref())
}

/// [`congestion_label`] from the module parameter's contents (`None`: not readable).
fn label_with_hystart(cc: &str, hystart: Option<&str>) -> String {
    if cc != "cubic" {
        return cc.to_string();
    }
    match hystart.map(str::trim) {
        Some("0") => "cubic, HyStart off (host-wide)".to_string(),
        Some("") | None => "cubic, HyStart unknown".to_string(),
        Some(_) => "cubic, HyStart on".to_string(),
    }
}

/// Makes `cc` usable as the default congestion control of a new network namespace.
///
/// The kernel lets a namespace other than the initial one default only to an algorithm in
/// the host's `net.ipv4.tcp_allowed_congestion_control` (anything else is `EPERM`), and
/// that list holds just `reno` and the host's own default unless someone added more. So a
/// host defaulting to BBR cannot give a testbed CUBIC, the congestion control of MPBond
/// §6.1, until CUBIC is allowed. This adds `cc` to the list (a global, additive change: it
/// also lets unprivileged sockets pick `cc`; it is left in place because concurrent
/// testbeds may rely on it), loading its module first if the kernel lacks it.
pub fn allow_congestion(cc: &str) -> Result<(), NetError> {
    let has = |list: &str| list.split_whitespace().any(|a| a == cc);
    let valid = mpbond_daemon::sys::is_congestion_name(cc);
    let mut available = cc_list(AVAILABLE_CC);
    if valid && !has(&available) {
        // Not built in: the module may exist (tcp_cubic, tcp_htcp, ...).
        let _ = sh(&["modprobe", "-q", &format!("tcp_{cc}")]);
        available = cc_list(AVAILABLE_CC);
    }
    if !valid || !has(&available) {
        return Err(NetError::Congestion {
            cc: cc.to_string(),
            available,
        });
    }
    let allowed = cc_list(ALLOWED_CC);
    if has(&allowed) {
        return Ok(());
    }
    let wanted = format!("{allowed} {cc}");
    std::fs::write(ALLOWED_CC, &wanted).map_err(|e| NetError::CongestionNotAllowed {
        cc: cc.to_string(),
        allowed: allowed.clone(),
        reason: e.to_string(),
    })?;
    tracing::info!(cc, allowed = %wanted, "allowed a congestion control in network namespaces");
    Ok(())
}

/// Runs a command, failing with its stderr.
pub fn sh(args: &[&str]) -> Result<(), NetError> {
    let cmd = args.join(" ");
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|source| NetError::Spawn {
            cmd: cmd.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(NetError::Command {
            cmd,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// `ip` commands gathered while a testbed is laid out and run as one `ip -batch` process for
/// the initial namespace and one per namespace (`ip -n NS -batch -`), instead of a process
/// each: a three-device testbed issues about fifty, at a few milliseconds apiece. The initial
/// namespace's commands (creating veths, moving devices into namespaces) run first, then
/// each namespace's in the order it was first named, each batch in the order given, so an
/// address goes on a device after the device has moved in.
#[derive(Debug, Default)]
pub struct IpBatch {
    root: Vec<String>,
    namespaces: Vec<(String, Vec<String>)>,
}

impl IpBatch {
    /// `ip ARGS` in the initial namespace.
    pub fn root(&mut self, args: &[&str]) {
        self.root.push(args.join(" "));
    }

    /// `ip -n NS ARGS`.
    pub fn ns(&mut self, ns: &str, args: &[&str]) {
        let line = args.join(" ");
        match self.namespaces.iter_mut().find(|(n, _)| n == ns) {
            Some((_, lines)) => lines.push(line),
            None => self.namespaces.push((ns.to_string(), vec![line])),
        }
    }

    /// Runs every command; the first batch that fails stops the rest, and its error has
    /// `ip`'s message (which names the failing line) and the batch's commands.
    pub fn run(self) -> Result<(), NetError> {
        if !self.root.is_empty() {
            ip_batch(None, &self.root)?;
        }
        for (ns, lines) in &self.namespaces {
            ip_batch(Some(ns), lines)?;
        }
        Ok(())
    }
}

/// One `ip [-n NS] -batch -` process fed `lines` on its standard input.
fn ip_batch(ns: Option<&str>, lines: &[String]) -> Result<(), NetError> {
    use std::io::Write;
    use std::process::Stdio;
    let mut args = Vec::new();
    if let Some(n) = ns {
        args.extend(["-n", n]);
    }
    args.extend(["-batch", "-"]);
    let cmd = format!("ip {} <<< {:?}", args.join(" "), lines.join("; "));
    let spawn_err = |source| NetError::Spawn {
        cmd: cmd.clone(),
        source,
    };
    let mut child = Command::new("ip")
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_err)?;
    let mut text = lines.join("\n");
    text.push('\n');
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(text.as_bytes()).map_err(spawn_err)?;
    }
    let out = child.wait_with_output().map_err(spawn_err)?;
    if !out.status.success() {
        return Err(NetError::Command {
            cmd,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Writes kernel settings in namespace `ns`: `(key, value)` pairs with the key as `sysctl`
/// spells it (`net.ipv4.ip_forward`), where a `*` component stands for every entry of that
/// directory (`net.ipv4.conf.*.rp_filter`). A thread enters the namespace and writes
/// `/proc/sys`, whose `net` tree is the writing thread's namespace's: one `ip netns exec NS
/// sysctl` costs two processes and a mount namespace (about 10 ms), and a testbed sets
/// three groups in each of its five or six namespaces. With `required` false a setting the
/// kernel lacks (IPv6 built out) is skipped; otherwise the error names the file.
pub fn sysctl(ns: &str, settings: &[(&str, &str)], required: bool) -> Result<(), NetError> {
    // A scoped thread: it borrows the settings, and it ends (leaving the namespace) before
    // this returns.
    std::thread::scope(|scope| {
        scope
            .spawn(|| write_sysctls(ns, settings, required))
            .join()
            .map_err(|_| NetError::Io(std::io::Error::other("the sysctl thread panicked")))?
    })
}

/// [`sysctl`]'s work, on a thread of its own, which it moves into namespace `ns`.
fn write_sysctls(ns: &str, settings: &[(&str, &str)], required: bool) -> Result<(), NetError> {
    enter(ns)?;
    for (key, value) in settings {
        let files = match sysctl_files(key) {
            Ok(f) => f,
            Err(_) if !required => continue,
            Err(e) => return Err(e),
        };
        for file in files {
            if let Err(e) = std::fs::write(&file, value) {
                if required {
                    return Err(NetError::Command {
                        cmd: format!("sysctl -w {key}={value} in {ns}"),
                        stderr: format!("{}: {e}", file.display()),
                    });
                }
            }
        }
    }
    Ok(())
}

/// The `/proc/sys` files a [`sysctl`] key names, a `*` component expanded over the
/// directory's entries (sorted, so that errors come in a stable order).
fn sysctl_files(key: &str) -> Result<Vec<std::path::PathBuf>, NetError> {
    let mut paths = vec![std::path::PathBuf::from("/proc/sys")];
    for part in key.split('.') {
        if part == "*" {
            let mut next = Vec::new();
            for p in &paths {
                let mut entries: Vec<_> = std::fs::read_dir(p)?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .collect();
                entries.sort();
                next.extend(entries);
            }
            paths = next;
        } else {
            for p in &mut paths {
                p.push(part);
            }
        }
    }
    Ok(paths)
}

/// Set in the environment of the copy of `mpbond lab` that runs inside the user namespace
/// [`prepare`] made.
const USERNS_ENV: &str = "MPBOND_LAB_USERNS";

/// What [`prepare`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Setup {
    /// This process can build testbeds: go on.
    Ready,
    /// An unprivileged user: a copy of this command ran inside a user namespace and exited
    /// with this code; exit with it.
    Reexecuted(i32),
}

/// Makes sure the lab can build testbeds. As root (CAP_NET_ADMIN and CAP_SYS_ADMIN) it
/// checks `ip` and `/dev/net/tun`. As an unprivileged user it re-runs the same command in a
/// new user, network and mount namespace (`unshare --user --map-root-user --net --mount`),
/// where it is root over everything it creates; `ip netns` then gets a private `/run`. The
/// error says what is missing when neither works.
pub fn prepare() -> Result<Setup, String> {
    // SAFETY: geteuid has no preconditions.
    #[allow(unsafe_code)]
    let euid = unsafe { libc::geteuid() };
    let inside = std::env::var_os(USERNS_ENV).is_some();
    if euid != 0 {
        if inside {
            return Err("the user namespace did not map this user to root".into());
        }
        return reexec_in_userns();
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Err("mpbond lab needs the `ip` command (apt-get install iproute2)".into());
    }
    if inside {
        // `ip netns add` keeps its handles under /run/netns, which an unprivileged user cannot
        // create; this mount namespace is ours, so give it a private /run.
        sh(&["mount", "-t", "tmpfs", "mpbond-lab", "/run"])
            .map_err(|e| format!("cannot give the user namespace its own /run: {e}"))?;
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
    {
        Ok(_) => Ok(Setup::Ready),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err("mpbond lab needs /dev/net/tun (modprobe tun)".into())
        }
        Err(e) if inside => Err(format!(
            "/dev/net/tun: {e}; without root the lab needs it readable and writable by your \
             user (most distributions make it mode 0666: sudo chmod 0666 /dev/net/tun), or \
             run it with sudo"
        )),
        Err(e) => Err(format!("cannot open /dev/net/tun: {e}")),
    }
}

fn reexec_in_userns() -> Result<Setup, String> {
    let no = |why: String| {
        format!(
            "mpbond lab creates network namespaces and TUN devices: run it with sudo, or as a \
             user allowed to create user namespaces ({why})"
        )
    };
    let base = [
        "--user",
        "--map-root-user",
        "--net",
        "--mount",
        "--propagation",
        "private",
        "--fork",
    ];
    let probe = Command::new("unshare")
        .args(base)
        .arg("true")
        .output()
        .map_err(|e| {
            no(format!(
                "cannot run unshare: {e}; apt-get install util-linux"
            ))
        })?;
    if !probe.status.success() {
        return Err(no(format!(
            "unshare said: {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        )));
    }
    let exe = std::env::current_exe().map_err(|e| no(format!("cannot find myself: {e}")))?;
    eprintln!("lab: not root; running in an unprivileged user namespace");
    let status = Command::new("unshare")
        .args(base)
        .arg("--")
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .env(USERNS_ENV, "1")
        .status()
        .map_err(|e| no(format!("cannot run unshare: {e}")))?;
    Ok(Setup::Reexecuted(status.code().unwrap_or(1)))
}

/// Every namespace this process created and has not deleted yet, for [`cleanup_all`].
static ACTIVE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Deletes every namespace this process still has (killing what runs in them). Called from
/// the signal handler of `mpbond lab`, so Ctrl-C leaves nothing behind even mid-run.
pub fn cleanup_all() {
    let names: Vec<String> = ACTIVE
        .lock()
        .map(|mut v| v.drain(..).collect())
        .unwrap_or_default();
    for n in names.iter().rev() {
        delete(n);
    }
}

fn delete(n: &str) {
    // Whatever still runs in it dies with it: `ip netns pids` then kill.
    if let Ok(out) = Command::new("ip").args(["netns", "pids", n]).output() {
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            let _ = Command::new("kill").args(["-9", pid]).output();
        }
    }
    let _ = Command::new("ip").args(["netns", "del", n]).output();
}

/// A set of namespaces deleted on drop.
#[derive(Debug, Default)]
pub struct Namespaces {
    names: Vec<String>,
}

impl Namespaces {
    /// Creates namespace `name` with its loopback up and no TCP metrics cache (so one run
    /// cannot inherit the previous run's ssthresh). Forwarding and reverse-path filtering are
    /// set per device once the testbed's devices are in place (`topo`).
    pub fn add(&mut self, name: &str) -> Result<(), NetError> {
        sh(&["ip", "netns", "add", name])?;
        self.names.push(name.to_string());
        if let Ok(mut v) = ACTIVE.lock() {
            v.push(name.to_string());
        }
        sh(&["ip", "-n", name, "link", "set", "lo", "up"])?;
        sysctl(name, &[("net.ipv4.tcp_no_metrics_save", "1")], true)
    }

    /// The namespaces, in creation order.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in self.names.drain(..).rev() {
            delete(&n);
            if let Ok(mut v) = ACTIVE.lock() {
                v.retain(|x| *x != n);
            }
        }
    }
}

/// A short prefix unique to this run, for namespace and interface names (interface names have
/// at most 15 bytes, so it is 5 characters).
pub fn run_prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mix = (std::process::id() as u64).wrapping_mul(0x9e37_79b9) ^ u64::from(nanos);
    format!("m{:04x}", mix & 0xffff)
}

/// Moves the calling thread into namespace `name`: sockets it creates afterwards live there.
/// Used by tests and by the lab's in-process clients; the thread should not be reused for
/// anything else.
pub fn enter(name: &str) -> Result<(), NetError> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(format!("/var/run/netns/{name}"))?;
    // SAFETY: setns with a namespace fd we hold open; affects only the calling thread.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(NetError::Io(std::io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{label_with_hystart, sysctl_files, IpBatch};

    /// A batch runs its commands in order, and one that fails stops it with an error that
    /// carries `ip`'s message and the commands; nothing after the failure runs. Needs root
    /// (as the lab does) for the namespace it makes.
    #[test]
    fn an_ip_batch_runs_in_order_and_a_failure_names_the_command() {
        let ns = format!("{}-ipbatch", super::run_prefix());
        let mut guard = super::Namespaces::default();
        guard.add(&ns).expect("a namespace (run as root)");
        let mut ip = IpBatch::default();
        ip.ns(
            &ns,
            &["link", "add", "d0", "type", "veth", "peer", "name", "d0p"],
        );
        ip.ns(&ns, &["addr", "add", "10.77.0.1/32", "dev", "d0"]);
        ip.ns(&ns, &["link", "set", "d0", "up"]);
        ip.run().expect("the batch");
        let show = std::process::Command::new("ip")
            .args(["-n", &ns, "addr", "show", "d0"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&show.stdout);
        assert!(
            text.contains("10.77.0.1/32") && text.contains("UP"),
            "{text}"
        );
        let mut bad = IpBatch::default();
        bad.ns(&ns, &["link", "set", "nosuchdev", "up"]);
        bad.ns(
            &ns,
            &["link", "add", "d1", "type", "veth", "peer", "name", "d1p"],
        );
        let e = bad.run().expect_err("a missing device fails").to_string();
        assert!(e.contains("nosuchdev") && e.contains("-batch"), "{e}");
        let after = std::process::Command::new("ip")
            .args(["-n", &ns, "link", "show", "d1"])
            .output()
            .unwrap();
        assert!(!after.status.success(), "the batch stopped at the failure");
    }

    /// A sysctl key maps to its `/proc/sys` file, and a `*` component to every entry of that
    /// directory: each interface's `rp_filter`, `all` and `default` included.
    #[test]
    fn a_sysctl_key_names_its_files_and_a_star_every_entry() {
        let one = sysctl_files("net.ipv4.ip_forward").unwrap();
        assert_eq!(
            one,
            vec![std::path::PathBuf::from("/proc/sys/net/ipv4/ip_forward")]
        );
        let every = sysctl_files("net.ipv4.conf.*.rp_filter").unwrap();
        for dev in ["all", "default", "lo"] {
            let f = std::path::PathBuf::from(format!("/proc/sys/net/ipv4/conf/{dev}/rp_filter"));
            assert!(every.contains(&f), "{f:?} missing from {every:?}");
        }
        assert!(every.iter().all(|f| f.exists()), "{every:?}");
        assert!(
            sysctl_files("net.nothing_here.*.x").is_err(),
            "a directory that is not there is an error"
        );
    }

    /// A report names CUBIC's HyStart as the module reads it, says when it cannot tell, and
    /// names other congestion controls as they are.
    #[test]
    fn the_congestion_label_says_whether_cubics_hystart_is_on() {
        assert_eq!(
            label_with_hystart("cubic", Some("1\n")),
            "cubic, HyStart on"
        );
        assert_eq!(
            label_with_hystart("cubic", Some("0\n")),
            "cubic, HyStart off (host-wide)"
        );
        assert_eq!(label_with_hystart("cubic", None), "cubic, HyStart unknown");
        assert_eq!(label_with_hystart("bbr", Some("0")), "bbr");
    }
}
