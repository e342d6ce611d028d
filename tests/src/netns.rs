//! Network namespaces a test makes for itself (it runs as root here): a namespace with a veth pair whose ends get
//! addresses the test chooses, so a test can put an HTTP target or a runner on an address that is not loopback,
//! use only addresses it created, and remove everything when done. Where that cannot be done (not root, no `ip`),
//! `create` says why and answers `None`, and the test skips with that reason printed.

use std::process::Command;

#[derive(Debug)]
pub struct Netns {
    pub name: String,
    /// The root namespace's end and its address (without the prefix length).
    pub host_link: String,
    pub host_ip: String,
    /// The namespace's end's address.
    pub inner_ip: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("cannot run `ip`: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("`ip {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl Netns {
    /// A namespace `tag`-unique to this process, its end at `inner/prefix`, the root namespace's at `host/prefix`.
    pub fn create(tag: &str, host: &str, inner: &str, prefix: u8) -> Option<Self> {
        let id = std::process::id() % 100_000;
        let name = format!("hf{tag}{id}");
        let (host_link, inner_link) = (format!("hfh{tag}{id}"), format!("hfi{tag}{id}"));
        let made = (|| {
            if !nix_is_root() {
                return Err("these tests need root to make a network namespace".to_owned());
            }
            ip(&["netns", "add", &name])?;
            ip(&["link", "add", &host_link, "type", "veth", "peer", "name", &inner_link])?;
            ip(&["link", "set", &inner_link, "netns", &name])?;
            ip(&["addr", "add", &format!("{host}/{prefix}"), "dev", &host_link])?;
            ip(&["link", "set", &host_link, "up"])?;
            ip(&["netns", "exec", &name, "ip", "addr", "add", &format!("{inner}/{prefix}"), "dev", &inner_link])?;
            ip(&["netns", "exec", &name, "ip", "link", "set", &inner_link, "up"])?;
            ip(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"])?;
            Ok(())
        })();
        let netns = Netns { name, host_link, host_ip: host.to_owned(), inner_ip: inner.to_owned() };
        match made {
            Ok(()) => Some(netns),
            Err(reason) => {
                println!("SKIPPED: {reason}");
                drop(netns);
                None
            }
        }
    }

    /// A command to run inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.name, program]);
        command
    }
}

fn nix_is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.host_link]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// A child process (say, one started in a namespace) killed and reaped when dropped.
#[derive(Debug)]
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Netns {
    /// A `hookflow-runner` (`binary`) inside the namespace, labelled `inside`, reaching the server at `server_url`
    /// (a relay on the root namespace's end) with `creds`, its output discarded; `extra` arguments after the rest.
    pub fn runner(&self, binary: &str, server_url: &str, creds: &crate::Creds, extra: &[&str]) -> Killed {
        let child = self
            .command(binary)
            .env("SERVICE_URL", server_url)
            .env("SERVICE_API_KEY", &creds.key)
            .env("SERVICE_ORGANIZATION_ID", creds.org.to_string())
            .args(["--labels", "inside", "--insecure-http", "--poll-wait-s", "5"])
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("runner in the namespace");
        Killed(child)
    }
}
