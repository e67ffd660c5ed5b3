//! The protobuf wire as the lazy messages read it, and the column buffers both scanners fill.

use std::collections::HashMap;

/// A field's value as it is on the wire.
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

/// The fields of one message, in order; `None` past the end, `Err` on what is declined.
pub struct Fields<'a> {
    buf: &'a [u8],
    at: usize,
}

pub struct Declined;

impl<'a> Fields<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
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

    pub fn next(&mut self) -> Result<Option<(u64, Value<'a>)>, Declined> {
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

/// Distinct slices numbered as they first come.
#[derive(Default)]
pub struct Distinct<'a> {
    numbers: HashMap<&'a [u8], u32>,
    pub values: Vec<&'a [u8]>,
}

impl<'a> Distinct<'a> {
    pub fn number(&mut self, value: &'a [u8]) -> u32 {
        let next = self.values.len() as u32;
        *self.numbers.entry(value).or_insert_with(|| {
            self.values.push(value);
            next
        })
    }
}

/// Ids as lower-case hex text, with Arrow's offsets (an empty id is empty text).
#[derive(Default)]
pub struct Hex {
    pub text: Vec<u8>,
    pub offsets: Vec<i32>,
}

impl Hex {
    pub fn push(&mut self, id: &[u8]) -> Result<(), Declined> {
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

/// A request's scopes that have items: `resources`, each resource's encoding (its
/// occurrences concatenated: protobuf merges a message field given twice), once however
/// many scopes it has; `scopes`, each (its resource's place in `resources`, its scope's
/// encoding, its items' encodings), in order. A scope without items is left out (it has
/// no rows), so that nothing here grows with the number of empty scopes.
#[derive(Default)]
pub struct Scoped<'a> {
    pub resources: Vec<Vec<u8>>,
    pub scopes: Vec<Scope<'a>>,
}

/// A scope with items: its resource's place in `Scoped::resources`, its scope's encoding,
/// its items' encodings.
pub type Scope<'a> = (usize, Vec<u8>, Vec<&'a [u8]>);

/// The scopes of a request (an `Export*ServiceRequest`: resources in field 1, each with
/// its resource in 1 and scopes in 2, each scope with its scope in 1 and items in 2).
pub fn scopes(payload: &[u8]) -> Result<Scoped<'_>, Declined> {
    let mut out = Scoped::default();
    let mut fields = Fields::new(payload);
    while let Some((number, value)) = fields.next()? {
        match (number, value) {
            (1, Value::Bytes(resource)) => {
                let (resource, scopes) = parts(resource)?;
                let mut kept = false;
                for scope in scopes {
                    let (scope, items) = parts(scope)?;
                    if !items.is_empty() {
                        out.scopes.push((out.resources.len(), scope, items));
                        kept = true;
                    }
                }
                if kept {
                    out.resources.push(resource);
                }
            }
            (1, _) => return Err(Declined),
            _ => {}
        }
    }
    Ok(out)
}

/// The scopes with an item kept: each resource's encoding once (`resources`), each scope
/// as (its resource's place there, its scope's encoding, how many of its items were kept),
/// and how many items were not (`skipped`).
#[derive(Default)]
pub struct Kept {
    pub resources: Vec<Vec<u8>>,
    pub scopes: Vec<(usize, Vec<u8>, usize)>,
    pub skipped: usize,
}

impl Kept {
    /// Each item of the request's scopes, in order, given to `keep`, which reads it and
    /// gathers it where it is kept (true).
    pub fn scan<'a>(
        payload: &'a [u8],
        mut keep: impl FnMut(&'a [u8]) -> Result<bool, Declined>,
    ) -> Result<Self, Declined> {
        let scoped = scopes(payload)?;
        let mut out = Kept {
            resources: scoped.resources,
            ..Kept::default()
        };
        for (resource, scope, items) in scoped.scopes {
            let mut kept = 0;
            for raw in items {
                if keep(raw)? {
                    kept += 1;
                } else {
                    out.skipped += 1;
                }
            }
            if kept > 0 {
                out.scopes.push((resource, scope, kept));
            }
        }
        Ok(out)
    }
}

/// A resource's or a scope's message: (field 1's occurrences concatenated, field 2's).
fn parts(buf: &[u8]) -> Result<(Vec<u8>, Vec<&[u8]>), Declined> {
    let mut first = Vec::new();
    let mut items = Vec::new();
    let mut fields = Fields::new(buf);
    while let Some((number, value)) = fields.next()? {
        match (number, value) {
            (1, Value::Bytes(b)) => first.extend_from_slice(b),
            (2, Value::Bytes(b)) => items.push(b),
            (3, Value::Bytes(_)) => {} // schema_url
            (1..=3, _) => return Err(Declined),
            _ => {}
        }
    }
    Ok((first, items))
}

/// The attributes of every item kept: distinct encodings, each attribute's number, and
/// each item's count.
#[derive(Default)]
pub struct Attributes<'a> {
    pub distinct: Distinct<'a>,
    pub index: Vec<u8>,
    pub counts: Vec<u8>,
}

impl<'a> Attributes<'a> {
    pub fn push(&mut self, attributes: &[&'a [u8]]) -> Result<(), Declined> {
        let count = u32::try_from(attributes.len()).map_err(|_| Declined)?;
        for raw in attributes {
            self.index
                .extend_from_slice(&self.distinct.number(raw).to_le_bytes());
        }
        self.counts.extend_from_slice(&count.to_le_bytes());
        Ok(())
    }
}
