//! rootsift's native span scanner: the spans of an OTLP traces request (protobuf), read
//! off the wire into column buffers for `rootsift.server.otlp_columns`.
//!
//! It reads what the lazy message of `otlp_types.lazy_request("traces")` reads, with the
//! same rules: a singular field's last occurrence wins, a message field's occurrences are
//! merged (their encodings concatenated, for Python to parse), an attribute, a status and
//! an event stay encoded, unknown fields are skipped. The request was parsed by the real
//! message when it was received, so the scanner does not validate it again: anything it
//! does not read exactly as upb would (a group, a known field with another wire type, an
//! overlong varint, a name that is not UTF-8, a time past int64 nanoseconds, a truncated
//! field) makes it decline (`None`), and the Python path converts the request instead.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use std::collections::HashMap;

/// A field's value as it is on the wire.
enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

/// The fields of one message, in order; `None` past the end, `Err` on what is declined.
struct Fields<'a> {
    buf: &'a [u8],
    at: usize,
}

struct Declined;

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Fields { buf, at: 0 }
    }

    fn varint(&mut self) -> Result<u64, Declined> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let byte = *self.buf.get(self.at).ok_or(Declined)?;
            self.at += 1;
            if i == 9 && byte > 1 {
                return Err(Declined);
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Declined)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Declined> {
        let end = self.at.checked_add(n).ok_or(Declined)?;
        let got = self.buf.get(self.at..end).ok_or(Declined)?;
        self.at = end;
        Ok(got)
    }

    fn next(&mut self) -> Result<Option<(u64, Value<'a>)>, Declined> {
        if self.at >= self.buf.len() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let number = tag >> 3;
        if number == 0 || number > (1 << 29) - 1 {
            return Err(Declined);
        }
        let value = match tag & 7 {
            0 => Value::Varint(self.varint()?),
            1 => Value::Fixed64(u64::from_le_bytes(
                self.take(8)?.try_into().map_err(|_| Declined)?,
            )),
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| Declined)?;
                Value::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Value::Fixed32
            }
            _ => return Err(Declined), // groups (3, 4) and the wire types that do not exist
        };
        Ok(Some((number, value)))
    }
}

/// One span, as the lazy message reads it.
#[derive(Default)]
struct Span<'a> {
    trace_id: &'a [u8],
    span_id: &'a [u8],
    parent_id: &'a [u8],
    name: &'a [u8],
    kind: i32,
    start: u64,
    end: u64,
    attributes: Vec<&'a [u8]>,
    status: &'a [u8],
    events: Vec<&'a [u8]>,
    links: u32,
}

fn span(buf: &[u8]) -> Result<Span<'_>, Declined> {
    let mut out = Span::default();
    let mut fields = Fields::new(buf);
    while let Some((number, value)) = fields.next()? {
        match (number, value) {
            (1, Value::Bytes(b)) => out.trace_id = b,
            (2, Value::Bytes(b)) => out.span_id = b,
            (3, Value::Bytes(_)) => {} // trace_state
            (4, Value::Bytes(b)) => out.parent_id = b,
            (5, Value::Bytes(b)) => out.name = b,
            (6, Value::Varint(v)) => out.kind = v as i32, // an int32 enum: its low 32 bits
            (7, Value::Fixed64(v)) => out.start = v,
            (8, Value::Fixed64(v)) => out.end = v,
            (9, Value::Bytes(b)) => out.attributes.push(b),
            (10, Value::Varint(_)) | (12, Value::Varint(_)) | (14, Value::Varint(_)) => {}
            (11, Value::Bytes(b)) => out.events.push(b),
            (13, Value::Bytes(_)) => out.links = out.links.checked_add(1).ok_or(Declined)?,
            (15, Value::Bytes(b)) => out.status = b,
            (16, Value::Fixed32) => {}           // flags
            (1..=16, _) => return Err(Declined), // a known field with another wire type
            _ => {}                              // an unknown field
        }
    }
    if std::str::from_utf8(out.name).is_err()
        || out.start > i64::MAX as u64
        || out.end > i64::MAX as u64
    {
        return Err(Declined);
    }
    Ok(out)
}

/// Distinct slices numbered as they first come.
#[derive(Default)]
struct Distinct<'a> {
    numbers: HashMap<&'a [u8], u32>,
    values: Vec<&'a [u8]>,
}

impl<'a> Distinct<'a> {
    fn number(&mut self, value: &'a [u8]) -> u32 {
        let next = self.values.len() as u32;
        *self.numbers.entry(value).or_insert_with(|| {
            self.values.push(value);
            next
        })
    }
}

/// Ids as lower-case hex text, with Arrow's offsets (an empty id is empty text).
#[derive(Default)]
struct Hex {
    text: Vec<u8>,
    offsets: Vec<i32>,
}

impl Hex {
    fn push(&mut self, id: &[u8]) -> Result<(), Declined> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        for byte in id {
            self.text.push(DIGITS[usize::from(byte >> 4)]);
            self.text.push(DIGITS[usize::from(byte & 15)]);
        }
        self.offsets
            .push(i32::try_from(self.text.len()).map_err(|_| Declined)?);
        Ok(())
    }
}

/// Every scope's spans with a start time, gathered per column.
#[derive(Default)]
struct Scan<'a> {
    scopes: Vec<(Vec<u8>, Vec<u8>, usize)>,
    skipped: usize,
    starts: Vec<u8>,
    ends: Vec<u8>,
    ids: [Hex; 3],
    names: Distinct<'a>,
    name_index: Vec<u8>,
    kinds: Vec<u8>,
    statuses: Distinct<'a>,
    status_index: Vec<u8>,
    attributes: Distinct<'a>,
    attribute_index: Vec<u8>,
    attribute_counts: Vec<u8>,
    event_counts: Vec<u8>,
    link_counts: Vec<u8>,
    events: Vec<(usize, Vec<&'a [u8]>)>,
    rows: usize,
}

impl<'a> Scan<'a> {
    fn request(&mut self, buf: &'a [u8]) -> Result<(), Declined> {
        let mut fields = Fields::new(buf);
        while let Some((number, value)) = fields.next()? {
            match (number, value) {
                (1, Value::Bytes(b)) => self.resource_spans(b)?,
                (1, _) => return Err(Declined),
                _ => {}
            }
        }
        Ok(())
    }

    fn resource_spans(&mut self, buf: &'a [u8]) -> Result<(), Declined> {
        let mut resource = Vec::new();
        let mut scopes = Vec::new();
        let mut fields = Fields::new(buf);
        while let Some((number, value)) = fields.next()? {
            match (number, value) {
                (1, Value::Bytes(b)) => resource.extend_from_slice(b),
                (2, Value::Bytes(b)) => scopes.push(b),
                (3, Value::Bytes(_)) => {}
                (1..=3, _) => return Err(Declined),
                _ => {}
            }
        }
        for scope in scopes {
            self.scope_spans(&resource, scope)?;
        }
        Ok(())
    }

    fn scope_spans(&mut self, resource: &[u8], buf: &'a [u8]) -> Result<(), Declined> {
        let mut scope = Vec::new();
        let mut spans = Vec::new();
        let mut fields = Fields::new(buf);
        while let Some((number, value)) = fields.next()? {
            match (number, value) {
                (1, Value::Bytes(b)) => scope.extend_from_slice(b),
                (2, Value::Bytes(b)) => spans.push(b),
                (3, Value::Bytes(_)) => {}
                (1..=3, _) => return Err(Declined),
                _ => {}
            }
        }
        let mut kept = 0;
        for raw in spans {
            let s = span(raw)?;
            if s.start == 0 {
                self.skipped += 1;
                continue;
            }
            self.add(s)?;
            kept += 1;
        }
        if kept > 0 {
            self.scopes.push((resource.to_vec(), scope, kept));
        }
        Ok(())
    }

    fn add(&mut self, s: Span<'a>) -> Result<(), Declined> {
        self.starts
            .extend_from_slice(&(s.start as i64).to_le_bytes());
        self.ends.extend_from_slice(&(s.end as i64).to_le_bytes());
        self.ids[0].push(s.trace_id)?;
        self.ids[1].push(s.span_id)?;
        self.ids[2].push(s.parent_id)?;
        self.name_index
            .extend_from_slice(&self.names.number(s.name).to_le_bytes());
        self.kinds.extend_from_slice(&s.kind.to_le_bytes());
        self.status_index
            .extend_from_slice(&self.statuses.number(s.status).to_le_bytes());
        let count = u32::try_from(s.attributes.len()).map_err(|_| Declined)?;
        for raw in s.attributes {
            self.attribute_index
                .extend_from_slice(&self.attributes.number(raw).to_le_bytes());
        }
        self.attribute_counts
            .extend_from_slice(&count.to_le_bytes());
        let events = u32::try_from(s.events.len()).map_err(|_| Declined)?;
        self.event_counts.extend_from_slice(&events.to_le_bytes());
        self.link_counts.extend_from_slice(&s.links.to_le_bytes());
        if !s.events.is_empty() {
            self.events.push((self.rows, s.events));
        }
        self.rows += 1;
        Ok(())
    }
}

fn bytes_list<'py>(py: Python<'py>, values: &[&[u8]]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, values.iter().map(|v| PyBytes::new(py, v)))
}

/// The spans of a traces request as column buffers, or `None` where the scanner declines
/// (the caller converts the request its own way). The tuple, in order: the scopes with a
/// kept span, each (its resource's encoding, its scope's encoding, the number kept); the
/// number of spans skipped for having no start time; the number kept; their starts and
/// ends (int64 nanoseconds); trace, span and parent ids as hex text, each (offsets as
/// int32, text); the distinct names and each span's number of its name (uint32); kinds
/// (int32); distinct status encodings and each span's number; distinct attribute
/// encodings, each attribute's number and each span's number of attributes; each span's
/// number of events and of links (uint32); the spans with events, each (its row, the
/// events' encodings). Buffers are little-endian bytes.
#[pyfunction]
fn scan_spans<'py>(py: Python<'py>, payload: &[u8]) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let mut scan = Scan::default();
    if scan.request(payload).is_err() {
        return Ok(None);
    }
    let scopes = PyList::empty(py);
    for (resource, scope, kept) in &scan.scopes {
        scopes.append((PyBytes::new(py, resource), PyBytes::new(py, scope), *kept))?;
    }
    let ids = PyList::empty(py);
    for hex in &scan.ids {
        let offsets: Vec<u8> = if hex.offsets.is_empty() {
            0i32.to_le_bytes().to_vec()
        } else {
            hex.offsets.iter().flat_map(|o| o.to_le_bytes()).collect()
        };
        ids.append((PyBytes::new(py, &offsets), PyBytes::new(py, &hex.text)))?;
    }
    let mut names = Vec::with_capacity(scan.names.values.len());
    for name in &scan.names.values {
        // checked by span(): every name is UTF-8
        names.push(PyString::new(py, std::str::from_utf8(name).unwrap_or("")));
    }
    let events = PyList::empty(py);
    for (row, raws) in &scan.events {
        events.append((*row, bytes_list(py, raws)?))?;
    }
    let items: Vec<Bound<'py, PyAny>> = vec![
        scopes.into_any(),
        scan.skipped.into_pyobject(py)?.into_any(),
        scan.rows.into_pyobject(py)?.into_any(),
        PyBytes::new(py, &scan.starts).into_any(),
        PyBytes::new(py, &scan.ends).into_any(),
        ids.into_any(),
        PyList::new(py, names)?.into_any(),
        PyBytes::new(py, &scan.name_index).into_any(),
        PyBytes::new(py, &scan.kinds).into_any(),
        bytes_list(py, &scan.statuses.values)?.into_any(),
        PyBytes::new(py, &scan.status_index).into_any(),
        bytes_list(py, &scan.attributes.values)?.into_any(),
        PyBytes::new(py, &scan.attribute_index).into_any(),
        PyBytes::new(py, &scan.attribute_counts).into_any(),
        PyBytes::new(py, &scan.event_counts).into_any(),
        PyBytes::new(py, &scan.link_counts).into_any(),
        events.into_any(),
    ];
    Ok(Some(PyTuple::new(py, items)?))
}

#[pymodule]
fn rootsift_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(scan_spans, m)?)?;
    Ok(())
}
