//! ETSI NFV-SOL 013 query parameters of a `GET` on a list resource: attribute-based filters
//! (clause 5.2), attribute selectors (clause 5.3) and paging (clause 5.4), over the JSON
//! representation of the resources (SOL003 `VnfInstance`, `VnfLcmOpOcc`, `LccnSubscription`).
//!
//! Pure: the server hands the raw query string and the list; [`ListQuery::parse`] checks it
//! (every error names the parameter, the position and what is expected, for a 400
//! ProblemDetails) and [`ListQuery::apply`] filters, orders, pages and selects.
//!
//! # Decisions
//! - **Filters.** `filter=(op,attr[/attr]*,value[,value]*)[;(...)]*`, the terms combined with
//!   AND; `op` is `eq`, `neq`, `gt`, `gte`, `lt`, `lte`, `cont`, `ncont`. `eq` and `cont` with
//!   several values match any of them; `neq` and `ncont` none of them. A value may be quoted
//!   with single quotes (`'a,b'`, a quote inside written twice). A path that goes through an
//!   array matches when one of its elements matches (`neq`/`ncont`: when none matches the
//!   negated term). A missing attribute matches only `neq` and `ncont`. Numbers compare as
//!   numbers, booleans as `true` / `false`, anything else as text; `gt`..`lte` on text compare
//!   lexically. The first segment of an attribute path must be an attribute of the resource
//!   (`known`): anything else is a 400 (SOL013 5.2.2: an unsupported attribute); deeper
//!   segments are not checked (the data model keeps some members as open JSON).
//! - **Selectors.** `all_fields`, `fields`, `exclude_fields`, `exclude_default`; `fields` may be
//!   combined with `exclude_default`, no other pair (SOL013 table 5.3.2-1, 400 otherwise).
//!   Without any, `exclude_default` applies (SOL003 5.4.2.3.2, 5.4.12.3.2). `fields=L` shows
//!   what `exclude_default` shows plus the attributes of `L`; `exclude_fields=L` everything but
//!   `L`. As for filters, the first segment of each path must be an attribute of the resource
//!   (400 otherwise); a deeper one that the resource lacks selects nothing.
//! - **Paging.** The list is ordered by `id`; a page holds at most `page_size` resources, and
//!   when more follow, [`Page::next_marker`] is the id of the page's last resource: the next
//!   page is `nextpage_opaque_marker=<marker>`, the resources whose id sorts after it. A marker
//!   stays valid while resources come and go (none is skipped or shown twice).
//! - Any other parameter, a parameter given twice, or a value where none is taken, is a 400.
//! - **Bounds.** A filter has at most [`MAX_FILTER_TERMS`] terms and [`MAX_FILTER_VALUES`]
//!   values in all, an attribute path (of a filter or a selector) at most
//!   [`MAX_PATH_SEGMENTS`] segments, a selector at most [`MAX_SELECTOR_PATHS`] paths: more is a
//!   400 naming the bound. Evaluating a filter borrows the resources (no value is copied) and
//!   counts its work in a [`Budget`] ([`ListQuery::apply_within`]): one unit per value visited
//!   on a path, and per comparison one unit plus the bytes of the two texts compared. A filter
//!   that would need more than the budget, or whose caller gave up (the budget's cancel flag),
//!   stops at once with [`ApplyError`], so that the work of one request is bounded by the
//!   budget whatever the size of the resources and of the filter.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use serde_json::{Map, Value};

/// The top-level attributes of SOL003 v3.3.1 `VnfInstance` (clause 5.5.2.2).
pub const VNF_INSTANCE_ATTRIBUTES: &[&str] = &[
    "id",
    "vnfInstanceName",
    "vnfInstanceDescription",
    "vnfdId",
    "vnfProvider",
    "vnfProductName",
    "vnfSoftwareVersion",
    "vnfdVersion",
    "vnfConfigurableProperties",
    "vimConnectionInfo",
    "cirConnectionInfo",
    "mciopRepositoryInfo",
    "certificateInfo",
    "instantiationState",
    "instantiatedVnfInfo",
    "metadata",
    "extensions",
    "_links",
];

/// The attributes of `VnfInstance` that `exclude_default` leaves out (SOL003 5.4.2.3.2).
pub const VNF_INSTANCE_DEFAULT_EXCLUDED: &[&str] = &[
    "vnfConfigurableProperties",
    "vimConnectionInfo",
    "instantiatedVnfInfo",
    "metadata",
    "extensions",
];

/// The top-level attributes of SOL003 v3.3.1 `VnfLcmOpOcc` (clause 5.5.2.13).
pub const VNF_LCM_OP_OCC_ATTRIBUTES: &[&str] = &[
    "id",
    "operationState",
    "stateEnteredTime",
    "startTime",
    "vnfInstanceId",
    "grantId",
    "operation",
    "isAutomaticInvocation",
    "operationParams",
    "isCancelPending",
    "cancelMode",
    "error",
    "resourceChanges",
    "changedInfo",
    "changedExtConnectivity",
    "modificationsTriggeredByVnfPkgChange",
    "vnfSnapshotInfoId",
    "lcmCoordinations",
    "rejectedLcmCoordinations",
    "warnings",
    "_links",
];

/// The attributes of `VnfLcmOpOcc` that `exclude_default` leaves out (SOL003 5.4.12.3.2).
pub const VNF_LCM_OP_OCC_DEFAULT_EXCLUDED: &[&str] = &[
    "operationParams",
    "error",
    "resourceChanges",
    "changedInfo",
    "changedExtConnectivity",
    "lcmCoordinations",
    "modificationsTriggeredByVnfPkgChange",
    "warnings",
];

/// The top-level attributes of SOL003 v3.3.1 `LccnSubscription` (clause 5.5.2.16); it has no
/// default-excluded attributes.
pub const LCCN_SUBSCRIPTION_ATTRIBUTES: &[&str] =
    &["id", "filter", "callbackUri", "verbosity", "_links"];

/// What a resource type offers to the query parameters of its list.
#[derive(Clone, Copy, Debug)]
pub struct Resource {
    /// Its top-level attribute names: a filter on another one is a 400.
    pub attributes: &'static [&'static str],
    /// The complex attributes `exclude_default` leaves out.
    pub default_excluded: &'static [&'static str],
    /// Whether the attribute selectors are taken (else they are unknown parameters).
    pub selectors: bool,
}

/// `GET /vnf_instances`.
pub const VNF_INSTANCES: Resource = Resource {
    attributes: VNF_INSTANCE_ATTRIBUTES,
    default_excluded: VNF_INSTANCE_DEFAULT_EXCLUDED,
    selectors: true,
};

/// `GET /vnf_lcm_op_occs`.
pub const VNF_LCM_OP_OCCS: Resource = Resource {
    attributes: VNF_LCM_OP_OCC_ATTRIBUTES,
    default_excluded: VNF_LCM_OP_OCC_DEFAULT_EXCLUDED,
    selectors: true,
};

/// `GET /subscriptions`: SOL003 5.4.18.3.2 asks for filters and paging; the selectors are
/// taken too (ETSI's conformance suite sends them), and with no default-excluded attribute
/// every selector but `fields` / `exclude_fields` shows the whole subscription.
pub const SUBSCRIPTIONS: Resource = Resource {
    attributes: LCCN_SUBSCRIPTION_ATTRIBUTES,
    default_excluded: &[],
    selectors: true,
};

/// The name of the paging parameter (SOL013 5.4.2.1).
pub const NEXTPAGE_MARKER: &str = "nextpage_opaque_marker";

/// The most terms of one filter (SOL013 clients send a handful).
pub const MAX_FILTER_TERMS: usize = 32;

/// The most values of one filter, all its terms together.
pub const MAX_FILTER_VALUES: usize = 256;

/// The most segments of one attribute path (`a/b/c`: 3), in a filter or a selector.
pub const MAX_PATH_SEGMENTS: usize = 16;

/// The most attribute paths of one selector (`fields`, `exclude_fields`).
pub const MAX_SELECTOR_PATHS: usize = 64;

/// A query string that cannot be taken: the parameter and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryError {
    /// The parameter (`filter`, `fields`, ...), or the text of an unknown one.
    pub parameter: String,
    /// What is wrong and what is expected.
    pub message: String,
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "query parameter {}: {}", self.parameter, self.message)
    }
}

impl std::error::Error for QueryError {}

fn err(parameter: &str, message: impl Into<String>) -> QueryError {
    QueryError {
        parameter: parameter.to_owned(),
        message: message.into(),
    }
}

/// A filter operator (SOL013 table 5.2.2-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// equal to one of the values
    Eq,
    /// equal to none of the values
    Neq,
    /// greater than
    Gt,
    /// greater than or equal
    Gte,
    /// less than
    Lt,
    /// less than or equal
    Lte,
    /// contains one of the values (text)
    Cont,
    /// contains none of the values (text)
    Ncont,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "eq" => Op::Eq,
            "neq" => Op::Neq,
            "gt" => Op::Gt,
            "gte" => Op::Gte,
            "lt" => Op::Lt,
            "lte" => Op::Lte,
            "cont" => Op::Cont,
            "ncont" => Op::Ncont,
            _ => return None,
        })
    }

    fn negated(self) -> bool {
        matches!(self, Op::Neq | Op::Ncont)
    }
}

/// One term of a filter: `(op,path,values...)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Term {
    /// The operator.
    pub op: Op,
    /// The attribute path, split at `/`.
    pub path: Vec<String>,
    /// The values (at least one).
    pub values: Vec<String>,
}

/// An attribute-based filter: every term must match (SOL013 5.2.2).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    /// The terms, combined with AND.
    pub terms: Vec<Term>,
}

impl Filter {
    /// Parses the value of `filter=` (already percent-decoded); `known` are the resource's
    /// top-level attributes.
    ///
    /// # Errors
    /// A [`QueryError`] naming the position and what is expected.
    pub fn parse(text: &str, known: &[&str]) -> Result<Filter, QueryError> {
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        let mut terms = Vec::new();
        let mut values_seen = 0usize;
        let bad = |at: usize, what: &str| {
            err(
                "filter",
                format!(
                    "{what} at character {} of {text:?}; expected \
                     (op,attribute[/attribute]*,value[,value]*)[;(...)]* with op one of eq, \
                     neq, gt, gte, lt, lte, cont, ncont",
                    at + 1
                ),
            )
        };
        if chars.is_empty() {
            return Err(bad(0, "empty filter"));
        }
        loop {
            if chars.get(i) != Some(&'(') {
                return Err(bad(i, "no '('"));
            }
            i += 1;
            // The fields of one term, split at unquoted commas.
            let mut fields: Vec<String> = Vec::new();
            let mut cur = String::new();
            let mut closed = false;
            while let Some(&c) = chars.get(i) {
                match c {
                    '\'' if cur.is_empty() => {
                        // A quoted value: up to the lone closing quote.
                        i += 1;
                        loop {
                            match chars.get(i) {
                                None => return Err(bad(i, "an unterminated quote")),
                                Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                                    cur.push('\'');
                                    i += 2;
                                }
                                Some('\'') => {
                                    i += 1;
                                    break;
                                }
                                Some(&c) => {
                                    cur.push(c);
                                    i += 1;
                                }
                            }
                        }
                        if !matches!(chars.get(i), Some(',') | Some(')')) {
                            return Err(bad(i, "text after a closing quote"));
                        }
                        // Keep empty quoted values apart from missing ones.
                        fields.push(std::mem::take(&mut cur));
                        if chars.get(i) == Some(&')') {
                            i += 1;
                            closed = true;
                            break;
                        }
                        i += 1;
                        if matches!(chars.get(i), Some(')')) {
                            return Err(bad(i, "an empty value"));
                        }
                        continue;
                    }
                    ',' => {
                        fields.push(std::mem::take(&mut cur));
                        i += 1;
                        if values_seen + fields.len() > MAX_FILTER_VALUES + 2 {
                            return Err(err(
                                "filter",
                                format!(
                                    "more than {MAX_FILTER_VALUES} values in term {}; expected \
                                     at most {MAX_FILTER_VALUES} in all the terms of a filter",
                                    terms.len() + 1
                                ),
                            ));
                        }
                    }
                    ')' => {
                        fields.push(std::mem::take(&mut cur));
                        i += 1;
                        closed = true;
                        break;
                    }
                    '(' | ';' => return Err(bad(i, &format!("{c:?} inside a term"))),
                    c => {
                        cur.push(c);
                        i += 1;
                    }
                }
            }
            if !closed {
                return Err(bad(i, "no ')'"));
            }
            if fields.len() < 3 {
                return Err(bad(i - 1, "a term with fewer than 3 fields"));
            }
            let op = Op::parse(&fields[0])
                .ok_or_else(|| bad(i - 1, &format!("unknown operator {:?}", fields[0])))?;
            let path: Vec<String> = fields[1].split('/').map(str::to_owned).collect();
            if path.iter().any(String::is_empty) {
                return Err(bad(
                    i - 1,
                    &format!("an empty attribute name in {:?}", fields[1]),
                ));
            }
            if path.len() > MAX_PATH_SEGMENTS {
                return Err(err(
                    "filter",
                    format!(
                        "the attribute path of term {} has {} segments; expected at most \
                         {MAX_PATH_SEGMENTS}",
                        terms.len() + 1,
                        path.len()
                    ),
                ));
            }
            if !known.contains(&path[0].as_str()) {
                return Err(err(
                    "filter",
                    format!(
                        "attribute {:?} is not an attribute of the resource; expected one of {}",
                        path[0],
                        known.join(", ")
                    ),
                ));
            }
            let values = fields.split_off(2);
            values_seen += values.len();
            if values_seen > MAX_FILTER_VALUES {
                return Err(err(
                    "filter",
                    format!(
                        "more than {MAX_FILTER_VALUES} values (term {} brings the count to \
                         {values_seen}); expected at most {MAX_FILTER_VALUES} in all the terms \
                         of a filter",
                        terms.len() + 1
                    ),
                ));
            }
            if terms.len() == MAX_FILTER_TERMS {
                return Err(err(
                    "filter",
                    format!(
                        "more than {MAX_FILTER_TERMS} terms; expected at most {MAX_FILTER_TERMS}"
                    ),
                ));
            }
            terms.push(Term { op, path, values });
            match chars.get(i) {
                None => break,
                Some(';') => i += 1,
                Some(_) => return Err(bad(i, "no ';' between terms")),
            }
        }
        Ok(Filter { terms })
    }

    /// Whether `v` (a resource's JSON) matches every term (without a bound on the work: see
    /// [`Filter::matches_within`]).
    pub fn matches(&self, v: &Value) -> bool {
        self.matches_within(v, &mut Budget::unlimited())
            .unwrap_or(false)
    }

    /// Whether `v` matches every term, the work counted in `budget`.
    ///
    /// # Errors
    /// [`ApplyError`] when the budget runs out or is cancelled.
    pub fn matches_within(&self, v: &Value, budget: &mut Budget<'_>) -> Result<bool, ApplyError> {
        for t in &self.terms {
            if !t.matches(v, budget)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Term {
    fn matches(&self, v: &Value, budget: &mut Budget<'_>) -> Result<bool, ApplyError> {
        // Whether some value at the path matches the positive form; the first one ends the
        // walk.
        let hit = any_at(v, &self.path, &mut |x, b| self.positive(x, b), budget)?;
        // `neq` / `ncont`: no value at the path, or none equal to / containing any of the
        // values.
        Ok(hit != self.op.negated())
    }

    /// The positive form of the term (`neq` as `eq`, `ncont` as `cont`) on one value.
    fn positive(&self, x: &Value, budget: &mut Budget<'_>) -> Result<bool, ApplyError> {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let text = text_of(x);
        for want in &self.values {
            budget.spend(1 + text.as_ref().map_or(0, |t| t.len()) as u64 + want.len() as u64)?;
            let hit = match self.op {
                Op::Eq | Op::Neq => compare(x, want) == Some(Equal),
                Op::Cont | Op::Ncont => text.as_ref().is_some_and(|s| s.contains(want.as_str())),
                Op::Gt => compare(x, want) == Some(Greater),
                Op::Gte => compare(x, want).is_some_and(|o| o != Less),
                Op::Lt => compare(x, want) == Some(Less),
                Op::Lte => compare(x, want).is_some_and(|o| o != Greater),
            };
            if hit {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Why [`ListQuery::apply_within`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApplyError {
    /// The filter needs more work than the budget's `limit` units.
    Exhausted {
        /// The budget, in units.
        limit: u64,
    },
    /// The caller gave up (the budget's cancel flag was set).
    Cancelled,
}

impl fmt::Display for ApplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApplyError::Exhausted { limit } => write!(
                f,
                "the filter needs more than {limit} units of work over the resources \
                 (a unit is a value visited or a byte compared); expected a narrower filter: \
                 fewer values, or attributes that hold less"
            ),
            ApplyError::Cancelled => f.write_str("the evaluation of the filter was cancelled"),
        }
    }
}

impl std::error::Error for ApplyError {}

/// The work one evaluation of a filter may do: `limit` units (a value visited on an attribute
/// path: one unit; a comparison: one unit plus the bytes of both texts), and a flag the caller
/// sets to stop it early (a request that timed out).
#[derive(Debug)]
pub struct Budget<'a> {
    limit: u64,
    left: u64,
    cancel: Option<&'a AtomicBool>,
}

impl<'a> Budget<'a> {
    /// A budget of `limit` units.
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            left: limit,
            cancel: None,
        }
    }

    /// No bound.
    pub fn unlimited() -> Self {
        Self::new(u64::MAX)
    }

    /// This budget, stopped when `flag` is set.
    pub fn with_cancel(mut self, flag: &'a AtomicBool) -> Self {
        self.cancel = Some(flag);
        self
    }

    /// The units spent so far.
    pub fn spent(&self) -> u64 {
        self.limit - self.left
    }

    fn spend(&mut self, units: u64) -> Result<(), ApplyError> {
        if units > self.left {
            self.left = 0;
            return Err(ApplyError::Exhausted { limit: self.limit });
        }
        self.left -= units;
        if self.cancel.is_some_and(|c| c.load(AtomicOrdering::Relaxed)) {
            return Err(ApplyError::Cancelled);
        }
        Ok(())
    }
}

/// Whether `hit` holds for one of the values at `path` under `v`, going into every element of
/// the arrays on the way (and of an array at the end); stops at the first.
fn any_at(
    v: &Value,
    path: &[String],
    hit: &mut dyn FnMut(&Value, &mut Budget<'_>) -> Result<bool, ApplyError>,
    budget: &mut Budget<'_>,
) -> Result<bool, ApplyError> {
    budget.spend(1)?;
    match v {
        Value::Array(items) => {
            for x in items {
                if any_at(x, path, hit, budget)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        _ => match path.split_first() {
            None => hit(v, budget),
            Some((head, rest)) => match v.get(head) {
                Some(x) => any_at(x, rest, hit, budget),
                None => Ok(false),
            },
        },
    }
}

/// The text of a scalar (borrowed for a string): what `cont` looks into.
fn text_of(x: &Value) -> Option<Cow<'_, str>> {
    match x {
        Value::String(s) => Some(Cow::Borrowed(s.as_str())),
        Value::Number(n) => Some(Cow::Owned(n.to_string())),
        Value::Bool(true) => Some(Cow::Borrowed("true")),
        Value::Bool(false) => Some(Cow::Borrowed("false")),
        _ => None,
    }
}

fn compare(x: &Value, want: &str) -> Option<std::cmp::Ordering> {
    match x {
        Value::Number(n) => {
            let a = n.as_f64()?;
            let b: f64 = want.parse().ok()?;
            a.partial_cmp(&b)
        }
        Value::Bool(b) => {
            let text = if *b { "true" } else { "false" };
            (text == want).then_some(std::cmp::Ordering::Equal)
        }
        Value::String(s) => Some(s.as_str().cmp(want)),
        _ => None,
    }
}

/// The attribute selector of a request (SOL013 5.3).
#[derive(Clone, Debug, PartialEq)]
pub enum Selector {
    /// `all_fields`: everything.
    AllFields,
    /// `exclude_default`, with the `fields` to show besides (empty: `exclude_default` alone,
    /// the default).
    ExcludeDefault(Vec<Vec<String>>),
    /// `exclude_fields`: everything but these.
    ExcludeFields(Vec<Vec<String>>),
}

/// The checked query parameters of a `GET` on a list.
#[derive(Clone, Debug)]
pub struct ListQuery {
    /// The filter (none: every resource).
    pub filter: Option<Filter>,
    /// The attribute selector.
    pub selector: Selector,
    /// `nextpage_opaque_marker`: show the resources whose id sorts after it.
    pub after: Option<String>,
    resource: Resource,
}

/// One page of a list.
#[derive(Clone, Debug)]
pub struct Page {
    /// The resources of the page, as the selector shows them.
    pub items: Vec<Value>,
    /// The marker of the next page, when more resources follow.
    pub next_marker: Option<String>,
}

/// Splits a raw query string (`a=1&b&c=x%2Cy`) into decoded name / value pairs (`+` is a
/// space, as in HTML forms).
///
/// # Errors
/// A percent-encoding that is not UTF-8.
pub fn parse_pairs(raw: &str) -> Result<Vec<(String, Option<String>)>, QueryError> {
    raw.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = match p.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (p, None),
            };
            let name = decode(k).ok_or_else(|| err(k, "percent-encoding that is not UTF-8"))?;
            let value = match v {
                Some(v) => Some(
                    decode(v).ok_or_else(|| err(&name, "percent-encoding that is not UTF-8"))?,
                ),
                None => None,
            };
            Ok((name, value))
        })
        .collect()
}

fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn paths(parameter: &str, v: &str, known: &[&str]) -> Result<Vec<Vec<String>>, QueryError> {
    let count = v.split(',').count();
    if count > MAX_SELECTOR_PATHS {
        return Err(err(
            parameter,
            format!("{count} attribute paths; expected at most {MAX_SELECTOR_PATHS}"),
        ));
    }
    v.split(',')
        .map(|p| {
            let path: Vec<String> = p.split('/').map(str::to_owned).collect();
            if path.len() > MAX_PATH_SEGMENTS {
                Err(err(
                    parameter,
                    format!(
                        "the attribute path {:?} has {} segments; expected at most \
                         {MAX_PATH_SEGMENTS}",
                        crate::input::shorten(p, 80),
                        path.len()
                    ),
                ))
            } else if path.iter().any(String::is_empty) {
                Err(err(
                    parameter,
                    format!(
                        "{v:?} has an empty attribute name; expected attribute[/attribute]* \
                         separated by commas"
                    ),
                ))
            } else if !known.contains(&path[0].as_str()) {
                Err(err(
                    parameter,
                    format!(
                        "attribute {:?} is not an attribute of the resource; expected one of {}",
                        path[0],
                        known.join(", ")
                    ),
                ))
            } else {
                Ok(path)
            }
        })
        .collect()
}

impl ListQuery {
    /// Checks the query string of a `GET` on a list of `resource`.
    ///
    /// # Errors
    /// An unknown parameter, one given twice, a value where none is taken (or none where one
    /// is), a malformed filter or selector, or selectors that cannot be combined.
    pub fn parse(raw: Option<&str>, resource: Resource) -> Result<ListQuery, QueryError> {
        let pairs = parse_pairs(raw.unwrap_or(""))?;
        let mut seen: Vec<&str> = Vec::new();
        let mut filter = None;
        let mut after = None;
        let (mut all, mut fields, mut excl_fields) = (false, None, None);
        let selectors = ["all_fields", "fields", "exclude_fields", "exclude_default"];
        let mut accepted = vec!["filter", NEXTPAGE_MARKER];
        if resource.selectors {
            accepted.extend(selectors);
        }
        for (name, value) in &pairs {
            let Some(&known) = accepted.iter().find(|a| **a == name.as_str()) else {
                return Err(err(
                    name,
                    format!(
                        "not a parameter of this resource; expected {}",
                        accepted.join(", ")
                    ),
                ));
            };
            if seen.contains(&known) {
                return Err(err(known, "given twice; expected it once"));
            }
            seen.push(known);
            let flag = matches!(known, "all_fields" | "exclude_default");
            let value = match (flag, value) {
                (true, None) => String::new(),
                (true, Some(v)) if v.is_empty() => String::new(),
                (true, Some(v)) => {
                    return Err(err(known, format!("takes no value; got {v:?}")));
                }
                (false, Some(v)) if !v.is_empty() => v.clone(),
                (false, _) => return Err(err(known, "needs a value")),
            };
            match known {
                "filter" => filter = Some(Filter::parse(&value, resource.attributes)?),
                "all_fields" => all = true,
                // The default: `fields` are shown besides what it shows.
                "exclude_default" => {}
                "fields" => fields = Some(paths(known, &value, resource.attributes)?),
                "exclude_fields" => {
                    excl_fields = Some(paths(known, &value, resource.attributes)?);
                }
                _ => after = Some(value),
            }
        }
        let given: Vec<&str> = seen
            .iter()
            .copied()
            .filter(|s| selectors.contains(s))
            .collect();
        let combinable = given.len() <= 1
            || (given.len() == 2
                && given.contains(&"fields")
                && given.contains(&"exclude_default"));
        if !combinable {
            return Err(err(
                &given.join(", "),
                "these attribute selectors cannot be combined; expected one of all_fields, \
                 fields, exclude_fields, exclude_default, or fields with exclude_default \
                 (SOL013 5.3.2)",
            ));
        }
        let selector = if all {
            Selector::AllFields
        } else if let Some(x) = excl_fields {
            Selector::ExcludeFields(x)
        } else {
            Selector::ExcludeDefault(fields.unwrap_or_default())
        };
        Ok(ListQuery {
            filter,
            selector,
            after,
            resource,
        })
    }

    /// Filters `items` (whole representations), orders them by `id`, keeps the page after the
    /// marker (at most `page_size`, at least 1) and applies the selector; the work is not
    /// bounded (see [`ListQuery::apply_within`]).
    pub fn apply(&self, items: Vec<Value>, page_size: usize) -> Page {
        match self.apply_within(items, page_size, &mut Budget::unlimited()) {
            Ok(p) => p,
            // An unlimited budget without a cancel flag never stops.
            Err(_) => Page {
                items: Vec::new(),
                next_marker: None,
            },
        }
    }

    /// [`ListQuery::apply`], the filter's work counted in `budget` (see the module's
    /// decisions): the resources are borrowed while they are filtered, and only the page is
    /// shaped by the selector.
    ///
    /// # Errors
    /// [`ApplyError`] when the budget runs out or is cancelled.
    pub fn apply_within(
        &self,
        mut items: Vec<Value>,
        page_size: usize,
        budget: &mut Budget<'_>,
    ) -> Result<Page, ApplyError> {
        fn id(v: &Value) -> &str {
            v.get("id").and_then(Value::as_str).unwrap_or("")
        }
        if let Some(after) = &self.after {
            items.retain(|v| id(v) > after.as_str());
        }
        if let Some(f) = &self.filter {
            let mut keep = Vec::with_capacity(items.len());
            for v in &items {
                keep.push(f.matches_within(v, budget)?);
            }
            let mut k = keep.into_iter();
            items.retain(|_| k.next().unwrap_or(false));
        }
        items.sort_by(|a, b| id(a).cmp(id(b)));
        let size = page_size.max(1);
        let next_marker = (items.len() > size).then(|| id(&items[size - 1]).to_owned());
        items.truncate(size);
        let items = items
            .into_iter()
            .map(|v| select(v, &self.selector, self.resource.default_excluded))
            .collect();
        Ok(Page { items, next_marker })
    }
}

impl Filter {
    /// The values of the first `eq` term on the top-level attribute `attr` (`(eq,attr,v1,v2)`:
    /// `[v1, v2]`), if the filter has one: every resource the filter matches has `attr` equal to
    /// one of them (a text attribute: the comparison is exact), so a store may select on them
    /// first and the whole filter then be evaluated on what it returns.
    pub fn eq_values(&self, attr: &str) -> Option<&[String]> {
        self.terms
            .iter()
            .find(|t| t.op == Op::Eq && t.path.len() == 1 && t.path[0] == attr)
            .map(|t| t.values.as_slice())
    }
}

/// A page of a list read from a store in chunks ordered by id (keyset paging), decided here
/// and read by the caller: [`Scan::next_read`] says which ids to read next (the ones after a
/// marker, at most so many), [`Scan::feed`] takes what was read and answers the page once it
/// is known. The filter is evaluated on each chunk within one [`Budget`] for the whole request.
///
/// At most `scan_limit` resources are read for one page: when that many were read and fewer
/// than a page matched, the page is answered **short**, with what matched and a
/// [`Page::next_marker`] at the last resource read (possibly an empty page with a marker), so
/// that one request never reads more than `scan_limit` rows however selective its filter; the
/// client follows the marker as for any page.
#[derive(Clone, Debug)]
pub struct Scan {
    query: ListQuery,
    page_size: usize,
    scan_limit: usize,
    scanned: usize,
    work_limit: u64,
    work_left: u64,
    cursor: Option<String>,
    matched: Vec<Value>,
}

impl Scan {
    /// The scan of one page of `query` (from its `nextpage_opaque_marker`): at most
    /// `page_size` resources (at least 1), at most `scan_limit` read (at least 1), the filter's
    /// work at most `work_limit` units.
    pub fn new(query: ListQuery, page_size: usize, scan_limit: usize, work_limit: u64) -> Self {
        let cursor = query.after.clone();
        Self {
            query,
            page_size: page_size.max(1),
            scan_limit: scan_limit.max(1),
            scanned: 0,
            work_limit,
            work_left: work_limit,
            cursor,
            matched: Vec::new(),
        }
    }

    /// The query.
    pub fn query(&self) -> &ListQuery {
        &self.query
    }

    /// What to read next: the resources whose id sorts after the first (none: from the first),
    /// at most the second, ordered by id.
    pub fn next_read(&self) -> (Option<&str>, usize) {
        let want = self
            .page_size
            .saturating_add(1)
            .saturating_sub(self.matched.len())
            .max(1);
        let left = self.scan_limit.saturating_sub(self.scanned).max(1);
        (self.cursor.as_deref(), want.min(left))
    }

    /// Takes `chunk`, what was read for [`Scan::next_read`] (whole representations, ordered by
    /// id; fewer than asked: the end of the list): the page when it is known, `None` when more
    /// must be read.
    ///
    /// # Errors
    /// [`ApplyError`] when the filter's work runs out or `cancel` is set.
    pub fn feed(
        &mut self,
        chunk: Vec<Value>,
        cancel: Option<&AtomicBool>,
    ) -> Result<Option<Page>, ApplyError> {
        let (_, asked) = self.next_read();
        let end = chunk.len() < asked;
        let mut budget = Budget::new(self.work_left);
        if let Some(flag) = cancel {
            budget = budget.with_cancel(flag);
        }
        let limit = self.work_limit;
        let exhausted = |e| match e {
            ApplyError::Exhausted { .. } => ApplyError::Exhausted { limit },
            other => other,
        };
        for v in chunk {
            self.scanned += 1;
            self.cursor = Some(page_id(&v).to_owned());
            let keep = match &self.query.filter {
                Some(f) => f.matches_within(&v, &mut budget).map_err(exhausted)?,
                None => true,
            };
            if keep {
                self.matched.push(v);
                if self.matched.len() > self.page_size {
                    let marker = page_id(&self.matched[self.page_size - 1]).to_owned();
                    return Ok(Some(self.page(Some(marker))));
                }
            }
        }
        self.work_left = self.work_left.saturating_sub(budget.spent());
        if end {
            return Ok(Some(self.page(None)));
        }
        if self.scanned >= self.scan_limit {
            let marker = self.cursor.clone();
            return Ok(Some(self.page(marker)));
        }
        Ok(None)
    }

    /// The rows read so far.
    pub fn scanned(&self) -> usize {
        self.scanned
    }

    fn page(&mut self, next_marker: Option<String>) -> Page {
        let mut items = std::mem::take(&mut self.matched);
        items.truncate(self.page_size);
        let items = items
            .into_iter()
            .map(|v| {
                select(
                    v,
                    &self.query.selector,
                    self.query.resource.default_excluded,
                )
            })
            .collect();
        Page { items, next_marker }
    }
}

fn page_id(v: &Value) -> &str {
    v.get("id").and_then(Value::as_str).unwrap_or("")
}

/// `v` as `selector` shows it.
pub fn select(v: Value, selector: &Selector, default_excluded: &[&str]) -> Value {
    match selector {
        Selector::AllFields => v,
        Selector::ExcludeFields(paths) => {
            let mut out = v;
            for p in paths {
                remove(&mut out, p);
            }
            out
        }
        Selector::ExcludeDefault(fields) => {
            let mut out = v.clone();
            if let Value::Object(o) = &mut out {
                for name in default_excluded {
                    o.remove(*name);
                }
            }
            for p in fields {
                if let Some(picked) = pick(&v, p) {
                    merge(&mut out, picked);
                }
            }
            out
        }
    }
}

fn remove(v: &mut Value, path: &[String]) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(|x| remove(x, path)),
        Value::Object(o) => match path {
            [] => {}
            [last] => {
                o.remove(last);
            }
            [head, rest @ ..] => {
                if let Some(x) = o.get_mut(head) {
                    remove(x, rest);
                }
            }
        },
        _ => {}
    }
}

/// The part of `v` at `path`, with its parents (arrays keep every element, in order).
fn pick(v: &Value, path: &[String]) -> Option<Value> {
    match (v, path.split_first()) {
        (_, None) => Some(v.clone()),
        (Value::Array(items), Some(_)) => Some(Value::Array(
            items
                .iter()
                .map(|x| pick(x, path).unwrap_or(Value::Object(Map::new())))
                .collect(),
        )),
        (Value::Object(o), Some((head, rest))) => {
            let inner = pick(o.get(head)?, rest)?;
            let mut m = Map::new();
            m.insert(head.clone(), inner);
            Some(Value::Object(m))
        }
        _ => None,
    }
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(x) => merge(x, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (x, y) in a.iter_mut().zip(b) {
                merge(x, y);
            }
        }
        (a, b) => *a = b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inst(id: &str, name: &str, state: &str) -> Value {
        json!({
            "id": id, "vnfInstanceName": name, "instantiationState": state,
            "vnfdId": "d", "metadata": {"k": 1},
            "instantiatedVnfInfo": {"flavourId": "default",
                "vnfcResourceInfo": [{"id": "a", "vduId": "VDU1"}, {"id": "b", "vduId": "VDU2"}]},
        })
    }

    fn q(raw: &str) -> Result<ListQuery, QueryError> {
        ListQuery::parse(Some(raw), VNF_INSTANCES)
    }

    fn ids(p: &Page) -> Vec<&str> {
        p.items.iter().map(|v| v["id"].as_str().unwrap()).collect()
    }

    /// Walks every page of `raw` over `all` (sorted by id) as a server reads a store: each
    /// page's ids, its marker and the rows it read.
    fn scan_all(
        raw: &str,
        all: &[Value],
        page_size: usize,
        scan_limit: usize,
    ) -> Vec<(Vec<String>, Option<String>, usize)> {
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let raw = match &marker {
                Some(m) => format!("{raw}&nextpage_opaque_marker={m}"),
                None => raw.to_owned(),
            };
            let mut scan = Scan::new(q(&raw).unwrap(), page_size, scan_limit, u64::MAX);
            let page = loop {
                let (after, n) = scan.next_read();
                let chunk: Vec<Value> = all
                    .iter()
                    .filter(|v| after.is_none_or(|a| v["id"].as_str().unwrap() > a))
                    .take(n)
                    .cloned()
                    .collect();
                if let Some(p) = scan.feed(chunk, None).unwrap() {
                    break p;
                }
            };
            let ids = page
                .items
                .iter()
                .map(|v| v["id"].as_str().unwrap().to_owned());
            out.push((ids.collect(), page.next_marker.clone(), scan.scanned()));
            marker = page.next_marker;
            if marker.is_none() || out.len() > 100 {
                return out;
            }
        }
    }

    fn numbered(n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| {
                inst(
                    &format!("{i:02}"),
                    if i % 4 == 0 { "edge" } else { "core" },
                    "X",
                )
            })
            .collect()
    }

    #[test]
    fn a_scan_pages_by_id_reading_one_more_than_a_page() {
        let pages = scan_all("exclude_default", &numbered(5), 2, 1000);
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            pages,
            vec![
                (s(&["00", "01"]), Some("01".into()), 3),
                (s(&["02", "03"]), Some("03".into()), 3),
                (s(&["04"]), None, 1),
            ]
        );
    }

    #[test]
    fn a_scan_stops_at_its_limit_with_a_short_page_and_a_marker() {
        // 12 instances, every fourth named edge (00, 04, 08); at most 3 rows read a page.
        let pages = scan_all("filter=(eq,vnfInstanceName,edge)", &numbered(12), 2, 3);
        for (_, _, read) in &pages {
            assert!(
                *read <= 3,
                "a page read {read} rows, more than the limit of 3"
            );
        }
        let seen: Vec<String> = pages.iter().flat_map(|p| p.0.clone()).collect();
        assert_eq!(seen, ["00", "04", "08"], "every match once, in order");
        assert_eq!(pages[0], (vec!["00".to_owned()], Some("02".into()), 3));
        assert!(pages.iter().all(|p| p.0.len() <= 2));
        assert_eq!(pages.last().unwrap().1, None);
        // Without a limit that bites, the pages are full.
        let pages = scan_all("filter=(eq,vnfInstanceName,edge)", &numbered(12), 2, 1000);
        assert_eq!(pages[0].0, ["00", "04"]);
        assert_eq!(pages[1].0, ["08"]);
        assert_eq!(pages.len(), 2);
    }

    #[test]
    fn a_scan_counts_the_filter_work_of_the_whole_request() {
        let mut scan = Scan::new(q("filter=(cont,vnfInstanceName,zzz)").unwrap(), 2, 1000, 40);
        let e = loop {
            let (_, n) = scan.next_read();
            match scan.feed(numbered(n), None) {
                Ok(None) => continue,
                Ok(Some(p)) => panic!("a page within the budget: {p:?}"),
                Err(e) => break e,
            }
        };
        assert_eq!(
            e,
            ApplyError::Exhausted { limit: 40 },
            "the request's whole limit"
        );
    }

    #[test]
    fn eq_values_are_those_of_the_first_eq_term_on_the_attribute() {
        let f = q("filter=(neq,id,x);(eq,vnfInstanceName,a,b);(eq,vnfInstanceName,c)")
            .unwrap()
            .filter
            .unwrap();
        assert_eq!(f.eq_values("vnfInstanceName").unwrap(), ["a", "b"]);
        assert!(f.eq_values("id").is_none(), "neq selects nothing");
        let f = q("filter=(eq,metadata/vnfInstanceName,a)")
            .unwrap()
            .filter
            .unwrap();
        assert!(
            f.eq_values("vnfInstanceName").is_none(),
            "a deeper path is not the attribute"
        );
    }

    fn list() -> Vec<Value> {
        vec![
            inst("3", "c", "INSTANTIATED"),
            inst("1", "a", "NOT_INSTANTIATED"),
            inst("2", "b,x", "INSTANTIATED"),
        ]
    }

    #[test]
    fn filters_combine_terms_and_values() {
        let p = q("filter=(eq,instantiationState,INSTANTIATED)").unwrap();
        assert_eq!(ids(&p.apply(list(), 10)), ["2", "3"]);
        let p = q("filter=(eq,vnfInstanceName,a,c);(neq,id,3)").unwrap();
        assert_eq!(ids(&p.apply(list(), 10)), ["1"]);
        let p = q("filter=(eq,vnfInstanceName,'b,x')").unwrap();
        assert_eq!(ids(&p.apply(list(), 10)), ["2"]);
        let p = q("filter=(cont,vnfInstanceName,x)").unwrap();
        assert_eq!(ids(&p.apply(list(), 10)), ["2"]);
        let p = q("filter=(ncont,vnfInstanceName,x)").unwrap();
        assert_eq!(ids(&p.apply(list(), 10)), ["1", "3"]);
        let p = q("filter=(gt,id,1)").unwrap();
        assert_eq!(ids(&p.apply(list(), 10)), ["2", "3"]);
        // Through an array: any element.
        let p = q("filter=(eq,instantiatedVnfInfo/vnfcResourceInfo/vduId,VDU2)").unwrap();
        assert_eq!(p.apply(list(), 10).items.len(), 3);
        let p = q("filter=(neq,instantiatedVnfInfo/vnfcResourceInfo/vduId,VDU2)").unwrap();
        assert!(p.apply(list(), 10).items.is_empty());
        // Numbers compare as numbers.
        let p = q("filter=(gte,metadata/k,1.0)").unwrap();
        assert_eq!(p.apply(list(), 10).items.len(), 3);
        // Percent-encoded.
        let p = q("filter=%28eq%2CvnfInstanceName%2Ca%29").unwrap();
        assert_eq!(ids(&p.apply(list(), 10)), ["1"]);
    }

    #[test]
    fn bad_filters_name_what_is_wrong() {
        for (raw, part) in [
            ("filter=(eq,nope,1)", "\"nope\" is not an attribute"),
            ("filter=(xx,id,1)", "unknown operator \"xx\""),
            ("filter=(eq,id)", "fewer than 3 fields"),
            ("filter=eq,id,1", "no '('"),
            ("filter=(eq,id,1", "no ')'"),
            ("filter=(eq,id,1)(eq,id,2)", "no ';'"),
            ("filter=(eq,id,'1)", "unterminated quote"),
            ("filter=(eq,id//x,1)", "empty attribute name"),
            ("filter=", "needs a value"),
            ("attribute_not_exist=some_value", "not a parameter"),
            ("filter=(eq,id,1)&filter=(eq,id,2)", "given twice"),
            ("all_fields=yes", "takes no value"),
            ("all_fields&fields=id", "cannot be combined"),
            ("exclude_fields=id,,vnfdId", "empty attribute name"),
            (
                "fields=criteria,objectInstanceIds",
                "\"criteria\" is not an attribute",
            ),
            ("exclude_fields=id,nope/x", "\"nope\" is not an attribute"),
        ] {
            let e = q(raw).unwrap_err();
            assert!(e.to_string().contains(part), "{raw}: {e}");
        }
        // /subscriptions: its own attributes.
        assert!(ListQuery::parse(Some("fields=callbackUri"), SUBSCRIPTIONS).is_ok());
        assert!(ListQuery::parse(Some("filter=(eq,callbackUri,x)"), SUBSCRIPTIONS).is_ok());
        assert!(ListQuery::parse(Some("filter=(eq,vnfdId,x)"), SUBSCRIPTIONS).is_err());
        let no_selectors = Resource {
            selectors: false,
            ..SUBSCRIPTIONS
        };
        assert!(ListQuery::parse(Some("all_fields"), no_selectors).is_err());
    }

    #[test]
    fn selectors() {
        let full = inst("1", "a", "INSTANTIATED");
        // Default: exclude_default.
        let v = q("").unwrap().apply(vec![full.clone()], 10).items.remove(0);
        assert!(v.get("instantiatedVnfInfo").is_none() && v.get("metadata").is_none());
        assert_eq!(v["vnfdId"], "d");
        let v = q("exclude_default").unwrap().apply(vec![full.clone()], 10);
        assert!(v.items[0].get("instantiatedVnfInfo").is_none());
        let v = q("all_fields").unwrap().apply(vec![full.clone()], 10);
        assert_eq!(v.items[0], full);
        let v = q("fields=instantiatedVnfInfo/vnfcResourceInfo/vduId,metadata&exclude_default")
            .unwrap()
            .apply(vec![full.clone()], 10)
            .items
            .remove(0);
        assert_eq!(v["metadata"], json!({"k": 1}));
        assert_eq!(
            v["instantiatedVnfInfo"],
            json!({"vnfcResourceInfo": [{"vduId": "VDU1"}, {"vduId": "VDU2"}]})
        );
        let v = q("exclude_fields=metadata,instantiatedVnfInfo/vnfcResourceInfo/id")
            .unwrap()
            .apply(vec![full], 10)
            .items
            .remove(0);
        assert!(v.get("metadata").is_none());
        assert_eq!(
            v["instantiatedVnfInfo"]["vnfcResourceInfo"],
            json!([{"vduId": "VDU1"}, {"vduId": "VDU2"}])
        );
    }

    #[test]
    fn paging_continues_after_the_marker() {
        let p = q("").unwrap().apply(list(), 2);
        assert_eq!(ids(&p), ["1", "2"]);
        assert_eq!(p.next_marker.as_deref(), Some("2"));
        // A resource added before the marker is not shown twice; the rest follows.
        let mut more = list();
        more.push(inst("0", "z", "INSTANTIATED"));
        let p = q("nextpage_opaque_marker=2").unwrap().apply(more, 2);
        assert_eq!(ids(&p), ["3"]);
        assert_eq!(p.next_marker, None);
    }
    #[test]
    fn filters_beyond_the_bounds_are_refused() {
        let many = vec!["y"; MAX_FILTER_VALUES + 1].join(",");
        let e = q(&format!("filter=(cont,metadata/a,{many})")).unwrap_err();
        assert!(e.to_string().contains("more than 256 values"), "{e}");
        // 17,000 values (issue 26's request): refused while parsing, not evaluated.
        let huge = vec!["y"; 17_000].join(",");
        let e = q(&format!("filter=(cont,metadata/a,{huge})")).unwrap_err();
        assert!(e.to_string().contains("more than 256 values"), "{e}");
        let terms = vec!["(eq,id,1)"; MAX_FILTER_TERMS + 1].join(";");
        let e = q(&format!("filter={terms}")).unwrap_err();
        assert!(e.to_string().contains("more than 32 terms"), "{e}");
        let deep = vec!["a"; MAX_PATH_SEGMENTS + 1].join("/");
        let e = q(&format!("filter=(eq,metadata/{deep},1)")).unwrap_err();
        assert!(
            e.to_string().contains("segments; expected at most 16"),
            "{e}"
        );
        let e = q(&format!("fields=metadata/{deep}")).unwrap_err();
        assert!(
            e.to_string().contains("segments; expected at most 16"),
            "{e}"
        );
        let paths = vec!["id"; MAX_SELECTOR_PATHS + 1].join(",");
        let e = q(&format!("exclude_fields={paths}")).unwrap_err();
        assert!(e.to_string().contains("65 attribute paths"), "{e}");
        // At the bounds: taken.
        let at = vec!["y"; MAX_FILTER_VALUES].join(",");
        assert!(q(&format!("filter=(cont,metadata/a,{at})")).is_ok());
    }

    #[test]
    fn heavy_filters_are_bounded_by_the_budget() {
        // Issue 26: a list of 50,000 strings and a filter that matches none of them.
        let big = json!({"id": "1", "metadata": {"a": vec!["xxxxxxxx"; 50_000]}});
        let values = vec!["y"; MAX_FILTER_VALUES].join(",");
        let p = q(&format!("filter=(cont,metadata/a,{values})")).unwrap();
        let mut b = Budget::new(1_000_000);
        let e = p.apply_within(vec![big.clone()], 10, &mut b).unwrap_err();
        assert_eq!(e, ApplyError::Exhausted { limit: 1_000_000 });
        assert_eq!(b.spent(), 1_000_000);
        // The whole evaluation is counted: the object, `metadata`, the list, then 50,000
        // values visited with 256 comparisons of 8 + 1 bytes each.
        let mut b = Budget::unlimited();
        let page = p.apply_within(vec![big.clone()], 10, &mut b).unwrap();
        assert!(page.items.is_empty());
        assert_eq!(b.spent(), 3 + 50_000 * (1 + 256 * (1 + 8 + 1)));
        // The first match ends the walk.
        let p = q("filter=(cont,metadata/a,x)").unwrap();
        let mut b = Budget::new(100);
        assert_eq!(
            p.apply_within(vec![big.clone()], 10, &mut b)
                .unwrap()
                .items
                .len(),
            1
        );
        // A cancelled evaluation stops.
        let flag = AtomicBool::new(true);
        let mut b = Budget::unlimited().with_cancel(&flag);
        assert_eq!(
            p.apply_within(vec![big], 10, &mut b).unwrap_err(),
            ApplyError::Cancelled
        );
        // Without a filter, nothing is spent.
        let mut b = Budget::new(0);
        assert_eq!(
            q("")
                .unwrap()
                .apply_within(list(), 10, &mut b)
                .unwrap()
                .items
                .len(),
            3
        );
    }
}
