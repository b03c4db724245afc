//! The connections of `vnfm serve`: hyper's own error answers as ProblemDetails too (every
//! connection of `super::conn` is a [`ProblemIo`]).
//!
//! hyper answers a few requests before the router sees them, and closes the connection: a
//! request line or header it cannot parse (400: a method or header name that is not a token, a
//! request target with a byte outside visible ASCII such as raw UTF-8, a malformed header), a
//! request target longer than [`MAX_TARGET`] bytes (414), and a request head larger than its
//! read buffer (about 400 KiB) or with more than 100 headers (431). It writes those as a bare
//! status line with an empty body. [`ProblemIo`] recognises such an answer on its way out (a
//! 400, 414 or 431 status line at the start of a write, without a `Content-Type`: every answer
//! of the router has one) and writes a SOL013 ProblemDetails of the same status in its place;
//! everything else passes through untouched.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use vnfm_core::problem::ProblemDetails;

use super::http::PROBLEM_JSON;

/// The longest request target hyper takes (its `MAX_URI_LEN`); a longer one is answered 414.
pub(crate) const MAX_TARGET: usize = 65_534;

/// A connection whose bare hyper error answers are rewritten as ProblemDetails (see the
/// module docs).
#[derive(Debug)]
pub(crate) struct ProblemIo<S> {
    inner: S,
    /// The replacement answer not yet written, from `written` on.
    pending: Vec<u8>,
    written: usize,
}

impl<S> ProblemIo<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            pending: Vec::new(),
            written: 0,
        }
    }
}

impl<S: AsyncWrite + Unpin> ProblemIo<S> {
    /// Writes what is left of the replacement answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            let n =
                ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ProblemIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ProblemIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_pending(cx))?;
        if let Some(answer) = replacement(buf) {
            this.pending = answer;
            this.written = 0;
            // The bare answer counts as written; the replacement goes out now or with the
            // flush or shutdown that follows.
            if let Poll::Ready(Err(e)) = this.poll_pending(cx) {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The ProblemDetails answer that replaces `buf` when it begins with one of hyper's bare error
/// answers.
fn replacement(buf: &[u8]) -> Option<Vec<u8>> {
    let rest = buf
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| buf.strip_prefix(b"HTTP/1.0 "))?;
    let (status, detail) = match rest.get(..4)? {
        b"400 " => (
            400,
            "the request is not valid HTTP/1.1: its request line or a header cannot be parsed \
             (a method or header name that is not a token, a request target with a space or a \
             byte outside visible ASCII, which must be percent-encoded, or a malformed header)"
                .to_owned(),
        ),
        b"414 " => (
            414,
            format!("the request target is longer than {MAX_TARGET} bytes; expected at most that"),
        ),
        b"431 " => (
            431,
            "the request head (request line and headers) is larger than about 400 KiB or has \
             more than 100 headers; expected less"
                .to_owned(),
        ),
        _ => return None,
    };
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    if head
        .split("\r\n")
        .skip(1)
        .any(|l| l.to_ascii_lowercase().starts_with("content-type:"))
    {
        return None;
    }
    let reason = axum::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    let body = serde_json::to_vec(&ProblemDetails::new(status, detail).with_title(reason)).ok()?;
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {PROBLEM_JSON}\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bare_error_answers_are_replaced() {
        let bare = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n\
                     content-length: 0\r\ndate: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(replacement(bare).unwrap()).unwrap();
        assert!(out.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(out.contains("content-type: application/problem+json\r\n"));
        let body: serde_json::Value =
            serde_json::from_str(out.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!(body["status"], 431);
        assert_eq!(body["title"], "Request Header Fields Too Large");
        // An answer of the router has a Content-Type; a 404 or a 200 are never hyper's.
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/problem+json\r\n\
                     content-length: 2\r\n\r\n{}";
        assert!(replacement(ours).is_none());
        assert!(replacement(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n").is_none());
        assert!(replacement(b"{\"status\": 400}").is_none());
    }
}
