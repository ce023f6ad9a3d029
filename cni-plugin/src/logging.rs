//! Logs to stderr and optionally to a file (`log_file`), each line prefixed `linkerd-cni:` so a grep
//! finds them. Whoever runs the plugin (the container runtime, or Multus for its delegates, through
//! libcni) copies its stderr to its own: the runtime's journal, or the Multus daemon pod's log (see the
//! the book's Troubleshooting). Never stdout: that carries only the CNI result.

use std::fmt;
use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Mutex;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// The prefix of every log line.
pub const PREFIX: &str = "linkerd-cni:";

/// `linkerd-cni: LEVEL message key=value ...`
struct Prefixed;

impl<S, N> FormatEvent<S, N> for Prefixed
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // Fields go through a fresh writer, which has ANSI colours off: the kubelet's journal and
        // log files are no terminal.
        let mut fields = String::new();
        ctx.field_format()
            .format_fields(Writer::new(&mut fields), event)?;
        writeln!(writer, "{PREFIX} {} {fields}", event.metadata().level())
    }
}

/// Writes each line to stderr and, if given, appends it to the file.
struct Sink {
    file: Option<Mutex<std::fs::File>>,
}

struct SinkWriter<'a>(&'a Sink);

impl std::io::Write for SinkWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        if let Some(file) = &self.0.file {
            if let Ok(mut f) = file.lock() {
                let _ = f.write_all(buf);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> MakeWriter<'a> for Sink {
    type Writer = SinkWriter<'a>;
    fn make_writer(&'a self) -> Self::Writer {
        SinkWriter(self)
    }
}

/// Installs the logger once per process. Our own events log at `level`. Dependencies (kube, hyper)
/// stay silent unless `level` is debug or finer, then only their warnings and errors: our own
/// messages already carry their errors, once. A log file that cannot be opened
/// is reported on stderr and otherwise ignored: logging must never fail a pod's network setup.
pub fn init(level: Level, file: Option<&Path>) {
    let file = file.and_then(
        |p| match OpenOptions::new().create(true).append(true).open(p) {
            Ok(f) => Some(Mutex::new(f)),
            Err(e) => {
                eprintln!("{PREFIX} WARN cannot open log file {}: {e}", p.display());
                None
            }
        },
    );
    let dependencies = if level >= Level::DEBUG {
        LevelFilter::WARN
    } else {
        LevelFilter::OFF
    };
    let filter = tracing_subscriber::filter::Targets::new()
        .with_default(dependencies)
        .with_target("linkerd_cni", level);
    let subscriber = tracing_subscriber::fmt()
        .event_format(Prefixed)
        .with_writer(Sink { file })
        .with_max_level(Level::TRACE)
        .finish();
    use tracing_subscriber::layer::SubscriberExt;
    let _ = tracing::subscriber::set_global_default(subscriber.with(filter));
}
