//! The log of `vnfm serve` (docs/serve.md "Logs"): `tracing` events written on stderr, one
//! line each, as text (`[server] log_format = "text"`, for people) or JSON (`"json"`, for a
//! log collector), every line with the id of the replica that wrote it ([`replica_id`]).
//! A request's line carries its request id (the client's `X-Request-Id` when it is sane,
//! [`client_request_id`], else one made here, [`RequestIds`]); the lines of an LCM operation
//! carry its instance id and its operation id (`observe`).
//!
//! What is never logged: request headers (`Authorization`, cookies), query strings, request
//! and response bodies, the configuration's secrets. The text format escapes every control
//! character, so that a value from a client never starts a line of its own.

use std::fmt::{self, Write as _};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;
use vnfm_core::driver::Clock as _;

use crate::config::{is_replica_id, LogFormat, ServerConfig, MAX_REPLICA_ID_LEN};
use crate::error::CliError;

/// The environment variable whose `EnvFilter` directives replace `[server] log_level`.
pub(crate) const LOG_ENV: &str = "VNFM_LOG";

/// The environment variable that replaces `[server] replica_id`.
pub(crate) const REPLICA_ENV: &str = "VNFM_REPLICA_ID";

/// The request id header, read from the request and echoed in the answer.
pub(crate) static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The longest `X-Request-Id` taken from a client (longer ones are replaced).
pub(crate) const MAX_REQUEST_ID_LEN: usize = 128;

/// The id of this replica: `VNFM_REPLICA_ID`, else `[server] replica_id`, else the hostname
/// (its first label when the whole name is not a valid id), else a random id of 8 hex digits.
///
/// # Errors
/// [`CliError::Usage`] for a `VNFM_REPLICA_ID` that is not a valid id
/// ([`crate::config::is_replica_id`]).
pub(crate) fn replica_id(config: &ServerConfig) -> Result<String, CliError> {
    if let Some(v) = std::env::var_os(REPLICA_ENV) {
        let v = v.to_string_lossy();
        if !is_replica_id(&v) {
            return Err(CliError::Usage(format!(
                "{REPLICA_ENV} {:?}: expected 1 to {MAX_REPLICA_ID_LEN} characters of A-Z a-z \
                 0-9 . _ -",
                crate::display::escape(&v)
            )));
        }
        return Ok(v.into_owned());
    }
    if let Some(id) = &config.replica_id {
        return Ok(id.clone());
    }
    Ok(hostname().unwrap_or_else(|| format!("{:08x}", random() as u32)))
}

/// The hostname of the machine (a pod's name in Kubernetes), when it makes a valid id.
fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())?;
    let name = name.trim();
    let first = name.split('.').next().unwrap_or(name);
    let id = [name, first].into_iter().find(|n| is_replica_id(n))?;
    Some(id.to_owned())
}

/// 64 random bits (the standard library's per-process random hash keys).
fn random() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x766e_666d);
    h.finish()
}

/// Installs the log of the `vnfm serve` process: the filter (`VNFM_LOG`, else `warn` with
/// `quiet`, else `[server] log_level`) and the format, with `replica` on every line. Does
/// nothing when the process has a global subscriber already (a program that embeds the server
/// logs as it chose).
///
/// # Errors
/// [`CliError::Usage`] for a `VNFM_LOG` or a `log_level` that are not `EnvFilter` directives.
pub(crate) fn init(config: &ServerConfig, quiet: bool, replica: &str) -> Result<(), CliError> {
    let (directives, source) = match std::env::var(LOG_ENV) {
        Ok(v) if !v.trim().is_empty() => (v, LOG_ENV),
        _ if quiet => ("warn".to_owned(), "--quiet"),
        _ => (config.log_level.clone(), "[server] log_level"),
    };
    let filter = EnvFilter::builder().parse(&directives).map_err(|e| {
        CliError::Usage(format!(
            "{source} {:?}: {e}; expected a level (error, warn, info, debug, trace) or tracing \
             EnvFilter directives such as \"warn,vnfm_cli=debug\"",
            crate::display::escape(&directives)
        ))
    })?;
    let json = config.log_format == LogFormat::Json;
    let layer = tracing_subscriber::fmt::layer()
        .event_format(Line {
            replica: replica.to_owned(),
            json,
        })
        .fmt_fields(Fields { json })
        .with_writer(std::io::stderr);
    let subscriber = tracing_subscriber::registry().with(filter).with(layer);
    // Another global subscriber (of a program that embeds the server) stays.
    let _ = tracing::subscriber::set_global_default(subscriber);
    Ok(())
}

/// The client's `X-Request-Id` when it is sane: one value of 1 to [`MAX_REQUEST_ID_LEN`]
/// visible ASCII characters (no space, no control character). Anything else is replaced by an
/// id of this server, so that a client cannot write a line of its own, nor a huge one.
pub(crate) fn client_request_id(headers: &HeaderMap) -> Option<HeaderValue> {
    let mut values = headers.get_all(&X_REQUEST_ID).iter();
    let v = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let b = v.as_bytes();
    ((1..=MAX_REQUEST_ID_LEN).contains(&b.len()) && b.iter().all(|c| (0x21..=0x7e).contains(c)))
        .then(|| v.clone())
}

/// The request ids this server makes: 16 hex digits, distinct within the process (a bijection
/// of a counter from a random start), unlikely to repeat across replicas.
#[derive(Debug)]
pub(crate) struct RequestIds {
    key: u64,
    next: AtomicU64,
}

impl RequestIds {
    pub(crate) fn new() -> Self {
        Self {
            key: random(),
            next: AtomicU64::new(random()),
        }
    }

    /// A new id.
    pub(crate) fn make(&self) -> HeaderValue {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut z = (n ^ self.key).wrapping_add(0x9e37_79b9_7f4a_7c15);
        // splitmix64's finaliser: a bijection of the 64 bits, so ids never repeat.
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 16];
        for (i, o) in out.iter_mut().enumerate() {
            *o = HEX[((z >> (60 - 4 * i)) & 0xf) as usize];
        }
        HeaderValue::from_bytes(&out).unwrap_or(HeaderValue::from_static("0"))
    }
}

/// The routes whose requests are logged at `debug` rather than `info` when they succeed: the
/// Alertmanager webhooks (a storm sends thousands a second, each alert that is ignored is
/// logged on its own), `/metrics` and `/healthz` (scraped and probed every few seconds).
pub(crate) fn is_routine(path: &str) -> bool {
    vnfm_core::alert::Endpoint::from_path(path).is_some()
        || path == "/metrics"
        || path == "/healthz"
}

/// How one event becomes one line: `vnfm serve: [<level>: ]<message> key=value ... replica=<id>`
/// (text), or `{"timestamp":…,"level":…,"replica":…,"message":…,key:value,…}` (JSON); the
/// fields of the spans the event is in (a request's `request_id`) come after its own.
struct Line {
    replica: String,
    json: bool,
}

impl<S, N> FormatEvent<S, N> for Line
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut v = Pairs::new(self.json);
        event.record(&mut v);
        let level = *event.metadata().level();
        if self.json {
            let now = crate::app::SystemClock
                .now()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            w.write_str("{\"timestamp\":")?;
            json_str(&mut w, &now)?;
            write!(w, ",\"level\":\"{level}\",\"replica\":")?;
            json_str(&mut w, &self.replica)?;
            w.write_str(",\"message\":")?;
            json_str(&mut w, &v.message)?;
            w.write_str(&v.out)?;
        } else {
            w.write_str("vnfm serve: ")?;
            match level {
                Level::INFO => {}
                Level::WARN => w.write_str("warning: ")?,
                Level::ERROR => w.write_str("error: ")?,
                Level::DEBUG => w.write_str("debug: ")?,
                Level::TRACE => w.write_str("trace: ")?,
            }
            w.write_str(&crate::display::escape(&v.message))?;
            w.write_str(&v.out)?;
        }
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let ext = span.extensions();
                if let Some(f) = ext.get::<FormattedFields<N>>() {
                    if !f.fields.is_empty() {
                        w.write_char(if self.json { ',' } else { ' ' })?;
                        w.write_str(&f.fields)?;
                    }
                }
            }
        }
        if self.json {
            w.write_str("}\n")
        } else {
            writeln!(w, " replica={}", self.replica)
        }
    }
}

/// How the fields of a span are kept (`key=value key=value`, or `"key":value,"key":value`),
/// for [`Line`] to copy into the lines of the events within it.
struct Fields {
    json: bool,
}

impl<'w> FormatFields<'w> for Fields {
    fn format_fields<R: RecordFields>(&self, mut w: Writer<'w>, fields: R) -> fmt::Result {
        let mut v = Pairs::new(self.json);
        fields.record(&mut v);
        w.write_str(v.out.get(1..).unwrap_or_default())
    }

    fn add_fields(
        &self,
        current: &'w mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let mut v = Pairs::new(self.json);
        fields.record(&mut v);
        if current.fields.is_empty() {
            current.fields.push_str(v.out.get(1..).unwrap_or_default());
        } else {
            current.fields.push_str(&v.out);
        }
        Ok(())
    }
}

/// The message of an event and its other fields, each preceded by its separator.
struct Pairs {
    json: bool,
    message: String,
    out: String,
}

impl Pairs {
    fn new(json: bool) -> Self {
        Self {
            json,
            message: String::new(),
            out: String::new(),
        }
    }

    /// `key`, then a value written by `raw` (a number, a bool) as it is.
    fn raw(&mut self, field: &Field, value: impl fmt::Display) {
        if self.json {
            let _ = write!(self.out, ",\"{}\":{value}", field.name());
        } else {
            let _ = write!(self.out, " {}={value}", field.name());
        }
    }

    fn string(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
            return;
        }
        if self.json {
            let _ = write!(self.out, ",\"{}\":", field.name());
            let _ = json_str(&mut self.out, value);
        } else if value.is_empty()
            || value
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '=')
        {
            // Debug quotes, and escapes quotes, backslashes and control characters.
            let _ = write!(self.out, " {}={value:?}", field.name());
        } else {
            let _ = write!(
                self.out,
                " {}={}",
                field.name(),
                crate::display::escape(value)
            );
        }
    }
}

impl Visit for Pairs {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.string(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            self.string(field, &format!("{value:?}"));
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.raw(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.raw(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.raw(field, value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if value.is_finite() {
            self.raw(field, value);
        } else {
            self.string(field, &value.to_string());
        }
    }
}

/// `s` as a JSON string.
fn json_str(w: &mut impl fmt::Write, s: &str) -> fmt::Result {
    w.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => w.write_str("\\\"")?,
            '\\' => w.write_str("\\\\")?,
            '\n' => w.write_str("\\n")?,
            '\r' => w.write_str("\\r")?,
            '\t' => w.write_str("\\t")?,
            c if (c as u32) < 0x20 => write!(w, "\\u{:04x}", c as u32)?,
            c => w.write_char(c)?,
        }
    }
    w.write_char('"')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sane_request_id_is_kept_and_a_hostile_one_replaced() {
        let mut h = HeaderMap::new();
        assert!(client_request_id(&h).is_none());
        h.insert(&X_REQUEST_ID, HeaderValue::from_static("abc-123_XYZ"));
        assert_eq!(client_request_id(&h).unwrap(), "abc-123_XYZ");
        for bad in [
            "a b".to_owned(),
            "x".repeat(MAX_REQUEST_ID_LEN + 1),
            String::new(),
        ] {
            h.insert(&X_REQUEST_ID, HeaderValue::from_str(&bad).unwrap());
            assert!(client_request_id(&h).is_none(), "{bad:?}");
        }
        h.insert(&X_REQUEST_ID, HeaderValue::from_bytes(b"a\tb").unwrap());
        assert!(client_request_id(&h).is_none());
        h.insert(
            &X_REQUEST_ID,
            HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        );
        assert!(client_request_id(&h).is_none());
        h.insert(&X_REQUEST_ID, HeaderValue::from_static("one"));
        h.append(&X_REQUEST_ID, HeaderValue::from_static("two"));
        assert!(client_request_id(&h).is_none());
    }

    #[test]
    fn made_request_ids_are_16_hex_digits_and_distinct() {
        let ids = RequestIds::new();
        let made: std::collections::BTreeSet<String> = (0..10_000)
            .map(|_| ids.make().to_str().unwrap().to_owned())
            .collect();
        assert_eq!(made.len(), 10_000);
        assert!(made
            .iter()
            .all(|i| i.len() == 16 && i.bytes().all(|b| b.is_ascii_hexdigit())));
    }

    #[test]
    fn json_strings_escape_quotes_and_controls() {
        let mut s = String::new();
        json_str(&mut s, "a\"b\\c\n\u{1b}é").unwrap();
        assert_eq!(s, r#""a\"b\\c\n\u001bé""#);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v, "a\"b\\c\n\u{1b}é");
    }
}
