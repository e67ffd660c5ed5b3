//! The log records of a logs request, as the lazy message of `otlp_types.lazy_request("logs")`
//! reads them, into column buffers.

use crate::wire::{Attributes, Declined, Distinct, Fields, Hex, Kept, Value};

/// A record's body: none, text (an `AnyValue` that is only its `string_value`, the last
/// one given), or any other value, left encoded for Python (`otlp.any_value`).
pub const BODY_NONE: u8 = 0;
pub const BODY_TEXT: u8 = 1;
pub const BODY_OTHER: u8 = 2;

/// One record's fields.
#[derive(Default)]
struct Record<'a> {
    time: u64,
    observed: u64,
    severity_number: i32,
    severity_text: &'a [u8],
    body: Vec<u8>,
    has_body: bool,
    attributes: Vec<&'a [u8]>,
    trace_id: &'a [u8],
    span_id: &'a [u8],
}

fn record(buf: &[u8]) -> Result<Record<'_>, Declined> {
    let mut out = Record::default();
    let mut fields = Fields::new(buf);
    while let Some((number, value)) = fields.next()? {
        match (number, value) {
            (1, Value::Fixed64(v)) => out.time = v,
            (11, Value::Fixed64(v)) => out.observed = v,
            (2, Value::Varint(v)) => out.severity_number = v as i32, // an int32 enum
            (3, Value::Bytes(b)) => out.severity_text = b,
            (5, Value::Bytes(b)) => {
                out.body.extend_from_slice(b); // a message given twice is the two merged
                out.has_body = true;
            }
            (6, Value::Bytes(b)) => out.attributes.push(b),
            (7, Value::Varint(_)) | (8, Value::Fixed32) => {} // dropped_attributes_count, flags
            (9, Value::Bytes(b)) => out.trace_id = b,
            (10, Value::Bytes(b)) => out.span_id = b,
            (1..=11, _) => return Err(Declined), // a known field with another wire type
            _ => {}                              // unknown, or event_name (not read)
        }
    }
    let time = if out.time != 0 {
        out.time
    } else {
        out.observed
    };
    if std::str::from_utf8(out.severity_text).is_err() || time > i64::MAX as u64 {
        return Err(Declined);
    }
    Ok(out)
}

/// The body's kind and, for text, the text (checked to be UTF-8).
fn body(record: &Record<'_>) -> Result<(u8, Option<Vec<u8>>), Declined> {
    if !record.has_body {
        return Ok((BODY_NONE, None));
    }
    let mut text = None;
    let mut fields = Fields::new(&record.body);
    while let Some((number, value)) = fields.next()? {
        match (number, value) {
            (1, Value::Bytes(b)) => text = Some(b),
            _ => return Ok((BODY_OTHER, None)),
        }
    }
    match text {
        None => Ok((BODY_NONE, None)), // an AnyValue with no value: no body
        Some(b) => {
            std::str::from_utf8(b).map_err(|_| Declined)?;
            Ok((BODY_TEXT, Some(b.to_vec())))
        }
    }
}

/// Every scope's records with a time, gathered per column.
#[derive(Default)]
pub struct Logs<'a> {
    pub kept: Kept,
    pub rows: usize,
    pub times: Vec<u8>,
    pub ids: [Hex; 2],
    pub severity_texts: Distinct<'a>,
    pub severity_index: Vec<u8>,
    pub severity_numbers: Vec<u8>,
    pub body_offsets: Vec<i32>,
    pub body_text: Vec<u8>,
    pub body_kinds: Vec<u8>,
    pub bodies: Vec<(usize, Vec<u8>)>,
    pub attributes: Attributes<'a>,
}

impl<'a> Logs<'a> {
    pub fn scan(payload: &'a [u8]) -> Result<Self, Declined> {
        let mut out = Logs {
            body_offsets: vec![0],
            ..Logs::default()
        };
        out.kept = Kept::scan(payload, |raw| {
            let r = record(raw)?;
            if r.time == 0 && r.observed == 0 {
                return Ok(false); // no time at all: rejected when received
            }
            out.add(r)?;
            Ok(true)
        })?;
        Ok(out)
    }

    fn add(&mut self, r: Record<'a>) -> Result<(), Declined> {
        let time = if r.time != 0 { r.time } else { r.observed };
        self.times.extend_from_slice(&(time as i64).to_le_bytes());
        self.ids[0].push(r.trace_id)?;
        self.ids[1].push(r.span_id)?;
        self.severity_index
            .extend_from_slice(&self.severity_texts.number(r.severity_text).to_le_bytes());
        self.severity_numbers
            .extend_from_slice(&r.severity_number.to_le_bytes());
        let (kind, text) = body(&r)?;
        if let Some(text) = text {
            self.body_text.extend_from_slice(&text);
        }
        if kind == BODY_OTHER {
            self.bodies.push((self.rows, r.body.clone()));
        }
        self.body_kinds.push(kind);
        self.body_offsets
            .push(i32::try_from(self.body_text.len()).map_err(|_| Declined)?);
        self.attributes.push(&r.attributes)?;
        self.rows += 1;
        Ok(())
    }
}
