//! The webhook's command-line flags; the operator flattens them into its own CLI (global, so its
//! subcommands read them too). Values the webhook would refuse at run time are refused here.

/// Flags of the admission webhook (served by the operator process).
#[derive(clap::Args, Clone, Debug)]
pub struct WebhookArgs {
    /// Address the HTTPS admission webhook listens on.
    #[arg(long, global = true, env = "WEBHOOK_ADDR", default_value = vocab::DEFAULT_WEBHOOK_ADDR,
          value_parser = socket_addr)]
    pub webhook_addr: String,

    /// PEM certificate chain the webhook serves; re-read whenever the file changes (no restart needed).
    /// Ignored in self-managed mode (--webhook-cert-secret).
    #[arg(long, global = true, env = "TLS_CERT_FILE", default_value = vocab::DEFAULT_TLS_CERT_FILE)]
    pub tls_cert_file: std::path::PathBuf,

    /// PEM private key matching --tls-cert-file; re-read whenever the file changes.
    #[arg(long, global = true, env = "TLS_KEY_FILE", default_value = vocab::DEFAULT_TLS_KEY_FILE)]
    pub tls_key_file: std::path::PathBuf,

    /// Self-managed certificate mode, for clusters without cert-manager: the name of a Secret (in the
    /// operator's namespace) where the operator keeps its own CA and serving certificate, rotating them
    /// well before expiry. Unset: serve the files given by --tls-cert-file/--tls-key-file.
    #[arg(long, global = true, env = "WEBHOOK_CERT_SECRET")]
    pub webhook_cert_secret: Option<String>,

    /// Self-managed mode: the MutatingWebhookConfiguration whose caBundle the operator keeps in sync with
    /// its CA. Only its entries that call the webhook (through --webhook-service-name in the operator's
    /// namespace, or a URL whose host the certificate names) are patched; nothing if it does not exist.
    /// In any certificate mode, while the admission policy is live (--admission), its entry
    /// `attach.multus.linkerd.io` gets a matchCondition that leaves it only the pods the policy cannot
    /// decide (removed again when the webhook is live).
    #[arg(long, global = true, env = "WEBHOOK_CONFIG_NAME")]
    pub webhook_config_name: Option<String>,

    /// Self-managed mode: the Service in front of the webhook; the certificate is issued for its DNS names.
    #[arg(
        long,
        global = true,
        env = "WEBHOOK_SERVICE_NAME",
        default_value = vocab::DEFAULT_WEBHOOK_SERVICE_NAME
    )]
    pub webhook_service_name: String,

    /// Self-managed mode: how often to re-check the stored certificate, pick up one another replica
    /// rotated, and re-sync the caBundle: e.g. 5m (a bare number is seconds).
    #[arg(long, global = true, env = "WEBHOOK_CERT_CHECK_INTERVAL", value_name = "DURATION",
          default_value = vocab::DEFAULT_WEBHOOK_CERT_CHECK_INTERVAL, value_parser = vocab::duration::flag)]
    pub webhook_cert_check_interval: std::time::Duration,

    /// Most connections the webhook holds open at once; at the limit further clients wait (in the
    /// kernel's accept backlog) until one closes. Connections that never send a request, slow TLS
    /// handshakes and slow requests are closed within seconds regardless, a connection idle between
    /// requests after 120 s (see the book's Reliability page).
    #[arg(long, global = true, env = "WEBHOOK_MAX_CONNECTIONS",
          default_value_t = vocab::DEFAULT_WEBHOOK_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub webhook_max_connections: u32,
}

impl WebhookArgs {
    /// The flags' defaults with `flags` (as on the command line, `--tls-cert-file=...`) applied: how
    /// code outside a CLI (tests, the bench) makes one, so the defaults exist once.
    pub fn from_flags<I, T>(flags: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        #[derive(clap::Parser)]
        struct Only {
            #[command(flatten)]
            webhook: WebhookArgs,
        }
        let argv = std::iter::once("webhook".into()).chain(flags.into_iter().map(Into::into));
        <Only as clap::Parser>::try_parse_from(argv).map(|only| only.webhook)
    }
}

/// `--webhook-addr` stays a string (as [`crate::Webhook::new`] takes it) but must parse as an address.
fn socket_addr(value: &str) -> Result<String, std::net::AddrParseError> {
    value.parse::<std::net::SocketAddr>()?;
    Ok(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::WebhookArgs;

    /// The defaults the helm chart and the Go operator's users rely on.
    #[test]
    fn defaults() {
        let a = WebhookArgs::from_flags(None::<&str>).unwrap();
        assert_eq!(a.webhook_addr, vocab::DEFAULT_WEBHOOK_ADDR);
        assert_eq!(a.tls_cert_file.to_str(), Some(vocab::DEFAULT_TLS_CERT_FILE));
        assert_eq!(a.tls_key_file.to_str(), Some(vocab::DEFAULT_TLS_KEY_FILE));
        assert_eq!(a.webhook_cert_secret, None);
        assert_eq!(a.webhook_config_name, None);
        assert_eq!(a.webhook_max_connections, 4096);
        assert!(WebhookArgs::from_flags(["--webhook-max-connections=0"]).is_err());
    }

    #[test]
    fn flags_override() {
        let cli = WebhookArgs::from_flags([
            "--webhook-addr=127.0.0.1:1",
            "--webhook-cert-secret=s",
            "--webhook-config-name=c",
        ])
        .unwrap();
        assert_eq!(cli.webhook_addr, "127.0.0.1:1");
        assert_eq!(cli.webhook_cert_secret.as_deref(), Some("s"));
        assert_eq!(cli.webhook_config_name.as_deref(), Some("c"));
    }

    /// Values the webhook would refuse later (per pod, or when binding) are refused when parsing.
    #[test]
    fn values_the_webhook_refuses_fail_to_parse() {
        for bad in ["--webhook-addr=nope", "--webhook-addr=127.0.0.1"] {
            let err = WebhookArgs::from_flags([bad]).expect_err(bad);
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{bad}");
        }
        let ok = WebhookArgs::from_flags(["--webhook-addr=[::1]:0"]);
        assert_eq!(ok.unwrap().webhook_addr, "[::1]:0");
    }
}
