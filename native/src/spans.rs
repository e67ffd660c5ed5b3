//! The spans of a traces request, as the lazy message of `otlp_types.lazy_request("traces")`
//! reads them, into column buffers.

use crate::wire::{Attributes, Declined, Distinct, Fields, Hex, Kept, Value};

/// One span's fields.
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

/// Every scope's spans with a start time, gathered per column.
#[derive(Default)]
pub struct Spans<'a> {
    pub kept: Kept,
    pub rows: usize,
    pub starts: Vec<u8>,
    pub ends: Vec<u8>,
    pub ids: [Hex; 3],
    pub names: Distinct<'a>,
    pub name_index: Vec<u8>,
    pub kinds: Vec<u8>,
    pub statuses: Distinct<'a>,
    pub status_index: Vec<u8>,
    pub attributes: Attributes<'a>,
    pub event_counts: Vec<u8>,
    pub link_counts: Vec<u8>,
    pub events: Vec<(usize, Vec<&'a [u8]>)>,
}

impl<'a> Spans<'a> {
    pub fn scan(payload: &'a [u8]) -> Result<Self, Declined> {
        let mut out = Spans::default();
        out.kept = Kept::scan(payload, |raw| {
            let s = span(raw)?;
            if s.start == 0 {
                return Ok(false); // no start time: rejected when received
            }
            out.add(s)?;
            Ok(true)
        })?;
        Ok(out)
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
        self.attributes.push(&s.attributes)?;
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
