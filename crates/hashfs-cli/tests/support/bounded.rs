//! Waits on programs bounded in time, for the tests that run programs (the shim's, the
//! mount's beside the shim): a program that hangs fails its test, with the stuck processes'
//! kernel wait channels and stacks, instead of running into CI's limit.

use std::process::{Child, Command, ExitStatus, Output};

/// How long a program a test runs may take before the test fails ([`output_within`]): far
/// past the slowest (a crate built inside the image takes under a minute), so that a hang
/// fails its test instead of running into CI's limit.
pub const RUN_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// `Command::output`, failing the test if the program has not ended within `limit`: the
/// stuck processes (the program and its descendants) are printed with their kernel wait
/// channels and, where gdb is installed, their threads' stacks, then killed. (Stop 97's CI
/// spent its whole 90 minutes in one such hang, a lock no one would release.)
pub fn output_within(c: &mut Command, limit: std::time::Duration) -> Output {
    use std::process::Stdio;
    let child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    output_of_within(child, &format!("{c:?}"), limit)
}

/// `Child::wait_with_output` within `limit`, as [`output_within`] (`what` names the
/// program in the failure).
fn output_of_within(mut child: Child, what: &str, limit: std::time::Duration) -> Output {
    use std::io::Read;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let out = drain(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let status = wait_within(&mut child, what, limit);
    Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

/// `Child::wait` within `limit`, as [`output_within`]. As `Child::wait`, it closes the
/// child's standard input first (a holder that reads a line before it exits gets its end).
fn wait_within(child: &mut Child, what: &str, limit: std::time::Duration) -> ExitStatus {
    drop(child.stdin.take());
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() >= deadline {
            let stuck = descendants(child.id());
            let report = stuck.iter().map(|&pid| describe_stuck(pid)).collect::<String>();
            for &pid in stuck.iter().rev() {
                // SAFETY: a signal to a process of this test's own.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
            let _ = child.wait();
            panic!("{what} still ran after {limit:?}; its processes:\n{report}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `Command`'s waits, bounded by [`RUN_LIMIT`] ([`output_within`]): a program that hangs
/// fails its test instead of running into CI's limit.
pub trait Bounded {
    fn output_bounded(&mut self) -> Output;
    fn status_bounded(&mut self) -> ExitStatus;
}

impl Bounded for Command {
    fn output_bounded(&mut self) -> Output {
        output_within(self, RUN_LIMIT)
    }
    fn status_bounded(&mut self) -> ExitStatus {
        let mut child = self.spawn().unwrap();
        wait_within(&mut child, &format!("{self:?}"), RUN_LIMIT)
    }
}

/// A spawned program's waits, bounded by [`RUN_LIMIT`] as [`Bounded`]'s.
pub trait BoundedChild {
    fn wait_bounded(&mut self) -> ExitStatus;
    fn wait_with_output_bounded(self) -> Output;
}

impl BoundedChild for Child {
    fn wait_bounded(&mut self) -> ExitStatus {
        let what = format!("process {}", self.id());
        wait_within(self, &what, RUN_LIMIT)
    }
    fn wait_with_output_bounded(self) -> Output {
        let what = format!("process {}", self.id());
        output_of_within(self, &what, RUN_LIMIT)
    }
}

/// Process `root` and its descendants, parents first (from /proc's parent links).
fn descendants(root: u32) -> Vec<u32> {
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()
    };
    let all: Vec<u32> = std::fs::read_dir("/proc")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(all.iter().copied().filter(|&c| parent_of(c) == Some(p)));
        i += 1;
    }
    found
}

/// A stuck process's command line, each thread's wait channel, and its threads' stacks
/// if gdb is installed.
fn describe_stuck(pid: u32) -> String {
    let read = |path: String| std::fs::read_to_string(path).unwrap_or_default();
    let mut s = format!("== {pid}: {}\n", read(format!("/proc/{pid}/cmdline")).replace('\0', " "));
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let tid = t.file_name().to_string_lossy().into_owned();
            s += &format!("   thread {tid}: waits in {}\n", read(format!("/proc/{pid}/task/{tid}/wchan")));
        }
    }
    if let Ok(o) = Command::new("gdb").args(["-p", &pid.to_string(), "-batch", "-ex", "thread apply all bt"]).output() {
        let bt = String::from_utf8_lossy(&o.stdout);
        s.extend(bt.lines().filter(|l| l.starts_with('#') || l.starts_with("Thread")).map(|l| format!("   {l}\n")));
    }
    s
}
