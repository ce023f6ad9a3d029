//! Linkerd's network validator (the CNI-mode init container `linkerd-network-validator`) in the tests:
//! which program plays it, how the injector stand-in runs it, and what a passing one logs.
//!
//! Two programs play it, and `e2e/tests/validator_agreement.rs` holds them to the same verdict
//! (exit 0 / 95) on the same pod:
//!
//! - [`Validator::TestWorkload`]: the test image's own `linkerd-multus-test-workload validate`
//!   ([`crate::workload`]), everywhere the real platform is not given (a clone of the project);
//! - [`Validator::Linkerd`]: Linkerd's real validator (linkerd2-proxy-init's `validator/`, static),
//!   which `e2e/images` copies into the test image at [`LINKERD_PATH`] (where Linkerd's proxy image
//!   keeps it) when `LINKERD_MULTUS_PLATFORM` names the platform. Where the platform is given, the node
//!   scenario's meshed pods run it, and [`Validator::for_node`] refuses to fall back to the test
//!   workload's when the node's test image lacks it.

use std::net::SocketAddr;
use std::process::Command;

use crate::images::OciImage;
use crate::node::Node;
use crate::platform::PLATFORM_ENV;
use crate::workspace_root;

/// Where `e2e/images` puts Linkerd's real validator in the test image: the path of Linkerd's proxy
/// image, which Linkerd's template runs as the container's `command`.
pub const LINKERD_PATH: &str = "/usr/lib/linkerd/linkerd2-network-validator";
/// The start of the line the test workload's `validate` prints when its connection was redirected.
pub const WORKLOAD_PASSED: &str = "validated:";
/// The end of the line Linkerd's validator logs (`--log-format plain`) when its connection was
/// redirected: `2026-11-28T06:34:20.313537Z  INFO linkerd_network_validator: Validated`.
const LINKERD_PASSED: &str = " linkerd_network_validator: Validated";
/// The address both listen on: Linkerd's outbound proxy port, where the rules send the pod's traffic.
const LISTEN_ADDR: &str = "0.0.0.0:4140";

/// Whether a validator's logs (stdout and stderr, as `kubectl logs` gives them) say that its connection
/// was redirected to its own listener: the test workload's `validated: …` line or Linkerd's
/// `… linkerd_network_validator: Validated`. The one test of "the validator passed" on the node.
pub fn passed(logs: &str) -> bool {
    logs.lines()
        .any(|line| line.starts_with(WORKLOAD_PASSED) || line.trim_end().ends_with(LINKERD_PASSED))
}

/// The program a meshed pod's `linkerd-network-validator` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validator {
    /// `linkerd-multus-test-workload validate ADDR` (the test image's entrypoint).
    TestWorkload,
    /// Linkerd's own, at [`LINKERD_PATH`] in the test image.
    Linkerd,
}

impl Validator {
    /// Which validator the node's meshed pods run: Linkerd's whenever the platform is given, the test
    /// workload's otherwise. Given the platform, a test image without Linkerd's is an error (it was
    /// built without the platform: rebuild it), never a silent fall-back to the test workload's.
    pub fn choose(platform_given: bool, image_has_linkerd: bool) -> Result<Self, String> {
        match (platform_given, image_has_linkerd) {
            (true, true) => Ok(Validator::Linkerd),
            (true, false) => Err(format!(
                "{PLATFORM_ENV} is set but the node's test image has no {LINKERD_PATH}: e2e/images \
                 copies Linkerd's validator into it only when {PLATFORM_ENV} is set while it runs; \
                 run e2e/images (or e2e/testbed up --node) again with it set"
            )),
            (false, _) => Ok(Validator::TestWorkload),
        }
    }

    /// [`Validator::choose`] for `node`: the platform variable of this test run, and the files of the
    /// test image `e2e/images` built for that node (its OCI archive). Panics with the reason when the
    /// platform is given and that image lacks Linkerd's validator, or when the archive cannot be read.
    pub fn for_node(node: &Node) -> Self {
        let given = std::env::var_os(PLATFORM_ENV).is_some_and(|v| !v.is_empty());
        let has = given && test_image_has_linkerd(node);
        Self::choose(given, has).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The container's `command`: none for the test workload (the image's entrypoint), Linkerd's
    /// binary otherwise.
    pub fn command(self) -> Vec<String> {
        match self {
            Validator::TestWorkload => Vec::new(),
            Validator::Linkerd => vec![LINKERD_PATH.to_string()],
        }
    }

    /// The container's `args` for a validator that connects to `connect` (an address outside the pod
    /// whose closed port refuses at once when nothing redirects). Linkerd's are its template's
    /// (linkerd2's `partials.network-validator`, IPv4): plain logs at debug, its listen address and
    /// its 10 s timeout.
    pub fn args(self, connect: SocketAddr) -> Vec<String> {
        let connect = connect.to_string();
        let args: Vec<&str> = match self {
            Validator::TestWorkload => vec!["validate", &connect],
            Validator::Linkerd => vec![
                "--log-format",
                "plain",
                "--log-level",
                "debug",
                "--connect-addr",
                &connect,
                "--listen-addr",
                LISTEN_ADDR,
                "--timeout",
                "10s",
            ],
        };
        args.into_iter().map(str::to_string).collect()
    }
}

/// Whether the test image `e2e/images` last built for `node` holds Linkerd's validator, executable.
fn test_image_has_linkerd(node: &Node) -> bool {
    let out = Command::new(workspace_root().join("e2e/images"))
        .args(["--archive", "test"])
        .env("LINKERD_MULTUS_TESTBED_DIR", node.dir())
        .output()
        .expect("run e2e/images --archive test");
    assert!(
        out.status.success(),
        "e2e/images --archive test: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let archive = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let image = OciImage::read_archive(&archive).unwrap_or_else(|e| {
        panic!(
            "the node's test image {} (written by e2e/images): {e}",
            archive.display()
        )
    });
    image.has_executable(LINKERD_PATH)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What each validator logs, passing and failing, as seen (2026-11-28) from the test workload
    /// and from Linkerd's v0.1.9: a helper that missed Linkerd's line would fail every meshed pod of
    /// the real-platform tiers; one that took a failure for a pass would hide unredirected pods.
    #[test]
    fn passed_reads_both_validators_lines() {
        let table: &[(&str, bool)] = &[
            ("validated: 10.0.0.1:20001 is redirected to port 4140\n", true),
            (
                "2026-11-28T06:34:20.312802Z  INFO linkerd_network_validator: Listening for connections on 0.0.0.0:4140\n\
                 2026-11-28T06:34:20.312892Z  INFO linkerd_network_validator: Connecting to 10.99.0.2:20001\n\
                 2026-11-28T06:34:20.313537Z  INFO linkerd_network_validator: Validated\n",
                true,
            ),
            (
                "linkerd-multus-test-workload: a connection to 10.0.0.1:20001 was not redirected to \
                 the outbound port: Connection refused (os error 111)\n",
                false,
            ),
            (
                "2026-11-28T06:34:17.291409Z  INFO linkerd_network_validator: Listening for connections on 0.0.0.0:4140\n\
                 2026-11-28T06:34:17.291500Z  INFO linkerd_network_validator: Connecting to 10.99.0.2:20001\n\
                 2026-11-28T06:34:17.291688Z ERROR linkerd_network_validator: Unable to connect to validator. Please ensure iptables rules are rewriting traffic as expected error=Connection refused (os error 111)\n",
                false,
            ),
            (
                "2026-11-28T06:34:20.296579Z ERROR linkerd_network_validator: Failed to validate networking configuration. Please ensure traffic redirection rules are rewriting traffic as expected. timeout=3s\n",
                false,
            ),
            ("", false),
        ];
        for (logs, want) in table {
            assert_eq!(passed(logs), *want, "{logs}");
        }
    }

    /// Given the platform, Linkerd's validator or an error; never the test workload's in its place.
    #[test]
    fn the_platform_always_means_linkerds_validator() {
        assert_eq!(Validator::choose(true, true), Ok(Validator::Linkerd));
        let err = Validator::choose(true, false).unwrap_err();
        assert!(
            err.contains(LINKERD_PATH) && err.contains(PLATFORM_ENV),
            "{err}"
        );
        assert_eq!(Validator::choose(false, true), Ok(Validator::TestWorkload));
        assert_eq!(Validator::choose(false, false), Ok(Validator::TestWorkload));
    }

    #[test]
    fn containers_run_as_linkerds_template_and_the_test_image_say() {
        let to: SocketAddr = "10.1.2.3:20001".parse().unwrap();
        assert!(Validator::TestWorkload.command().is_empty());
        assert_eq!(
            Validator::TestWorkload.args(to),
            ["validate", "10.1.2.3:20001"]
        );
        assert_eq!(Validator::Linkerd.command(), [LINKERD_PATH]);
        assert_eq!(
            Validator::Linkerd.args(to).join(" "),
            "--log-format plain --log-level debug --connect-addr 10.1.2.3:20001 \
             --listen-addr 0.0.0.0:4140 --timeout 10s"
        );
    }

    /// `e2e/images` copies the platform's validator (by the platform's name for it) to [`LINKERD_PATH`]:
    /// a rename on either side would leave the node's pods without it.
    #[test]
    fn e2e_images_copies_the_platforms_validator_where_this_module_runs_it() {
        let script =
            std::fs::read_to_string(workspace_root().join("e2e/images")).expect("read e2e/images");
        assert!(
            script.contains(&format!(
                "VALIDATOR_NAME={}\n",
                crate::platform::NETWORK_VALIDATOR
            )),
            "e2e/images names another validator than platform::NETWORK_VALIDATOR"
        );
        assert!(
            script.contains(&format!("VALIDATOR_PATH={LINKERD_PATH}\n")),
            "e2e/images copies the validator elsewhere than {LINKERD_PATH}"
        );
    }
}
