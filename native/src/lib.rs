//! rootsift's native scanner: the spans and log records of an OTLP request (protobuf), read
//! off the wire into column buffers for `rootsift.server.otlp_scan`.
//!
//! It reads what the lazy messages of `otlp_types.lazy_request` read, with the same rules:
//! a singular field's last occurrence wins, a message field's occurrences are merged (their
//! encodings concatenated, for Python to parse), an attribute, a status and an event stay
//! encoded, unknown fields are skipped. The request was parsed by the real message when it
//! was received, so the scanner does not validate it again: anything it does not read
//! exactly as upb would (a group, a known field with another wire type, an overlong
//! varint, text that is not UTF-8, a time past int64 nanoseconds, a truncated field) makes
//! it decline (`None`), and the Python path converts the request instead.

mod logs;
mod spans;
mod wire;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use wire::{Attributes, Distinct, Hex};

fn bytes_list<'py>(py: Python<'py>, values: &[&[u8]]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, values.iter().map(|v| PyBytes::new(py, v)))
}

/// Distinct UTF-8 slices (checked by the scan) as a list of str.
fn text_list<'py>(py: Python<'py>, distinct: &Distinct<'_>) -> PyResult<Bound<'py, PyList>> {
    PyList::new(
        py,
        distinct
            .values
            .iter()
            .map(|v| PyString::new(py, std::str::from_utf8(v).unwrap_or(""))),
    )
}

/// Each scope as (its resource's encoding, its scope's encoding, its items kept), one
/// bytes object per resource however many scopes share it.
fn scopes_list<'py>(
    py: Python<'py>,
    resources: &[Vec<u8>],
    scopes: &[(usize, Vec<u8>, usize)],
) -> PyResult<Bound<'py, PyList>> {
    let shared: Vec<Bound<'py, PyBytes>> = resources.iter().map(|r| PyBytes::new(py, r)).collect();
    let out = PyList::empty(py);
    for (resource, scope, kept) in scopes {
        out.append((shared[*resource].clone(), PyBytes::new(py, scope), *kept))?;
    }
    Ok(out)
}

fn ids_list<'py>(py: Python<'py>, ids: &[Hex]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for hex in ids {
        let offsets: Vec<u8> = if hex.offsets.is_empty() {
            0i32.to_le_bytes().to_vec()
        } else {
            hex.offsets.iter().flat_map(|o| o.to_le_bytes()).collect()
        };
        out.append((PyBytes::new(py, &offsets), PyBytes::new(py, &hex.text)))?;
    }
    Ok(out)
}

fn attributes_tuple<'py>(py: Python<'py>, a: &Attributes<'_>) -> PyResult<Bound<'py, PyTuple>> {
    let items: Vec<Bound<'py, PyAny>> = vec![
        bytes_list(py, &a.distinct.values)?.into_any(),
        PyBytes::new(py, &a.index).into_any(),
        PyBytes::new(py, &a.counts).into_any(),
    ];
    PyTuple::new(py, items)
}

/// The spans of a traces request as column buffers, or `None` where the scanner declines
/// (the caller converts the request its own way). The tuple, in order: the scopes with a
/// kept span, each (its resource's encoding, its scope's encoding, the number kept); the
/// number of spans skipped for having no start time; the number kept; their starts and
/// ends (int64 nanoseconds); trace, span and parent ids as hex text, each (offsets as
/// int32, text); the distinct names and each span's number of its name (uint32); kinds
/// (int32); distinct status encodings and each span's number; the attributes (distinct
/// encodings, each attribute's number, each span's number of attributes); each span's
/// number of events and of links (uint32); the spans with events, each (its row, the
/// events' encodings). Buffers are little-endian bytes.
#[pyfunction]
fn scan_spans<'py>(py: Python<'py>, payload: &[u8]) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Ok(scan) = spans::Spans::scan(payload) else {
        return Ok(None);
    };
    let events = PyList::empty(py);
    for (row, raws) in &scan.events {
        events.append((*row, bytes_list(py, raws)?))?;
    }
    let items: Vec<Bound<'py, PyAny>> = vec![
        scopes_list(py, &scan.kept.resources, &scan.kept.scopes)?.into_any(),
        scan.kept.skipped.into_pyobject(py)?.into_any(),
        scan.rows.into_pyobject(py)?.into_any(),
        PyBytes::new(py, &scan.starts).into_any(),
        PyBytes::new(py, &scan.ends).into_any(),
        ids_list(py, &scan.ids)?.into_any(),
        text_list(py, &scan.names)?.into_any(),
        PyBytes::new(py, &scan.name_index).into_any(),
        PyBytes::new(py, &scan.kinds).into_any(),
        bytes_list(py, &scan.statuses.values)?.into_any(),
        PyBytes::new(py, &scan.status_index).into_any(),
        attributes_tuple(py, &scan.attributes)?.into_any(),
        PyBytes::new(py, &scan.event_counts).into_any(),
        PyBytes::new(py, &scan.link_counts).into_any(),
        events.into_any(),
    ];
    Ok(Some(PyTuple::new(py, items)?))
}

/// The log records of a logs request as column buffers, or `None` where the scanner
/// declines. The tuple, in order: the scopes with a kept record (as for spans); the number
/// skipped for having no time at all; the number kept; their times (int64 nanoseconds: the
/// record's time, else when it was observed); trace and span ids as hex text, each (offsets,
/// text); the distinct severity texts and each record's number of its text; severity
/// numbers (int32); bodies as (offsets as int32, text, each record's kind as uint8: 0 none,
/// 1 text, 2 another value), and for each body of another value (its row, its encoding);
/// the attributes (as for spans).
#[pyfunction]
fn scan_logs<'py>(py: Python<'py>, payload: &[u8]) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Ok(scan) = logs::Logs::scan(payload) else {
        return Ok(None);
    };
    let bodies = PyList::empty(py);
    for (row, raw) in &scan.bodies {
        bodies.append((*row, PyBytes::new(py, raw)))?;
    }
    let offsets: Vec<u8> = scan
        .body_offsets
        .iter()
        .flat_map(|o| o.to_le_bytes())
        .collect();
    let body: Vec<Bound<'py, PyAny>> = vec![
        PyBytes::new(py, &offsets).into_any(),
        PyBytes::new(py, &scan.body_text).into_any(),
        PyBytes::new(py, &scan.body_kinds).into_any(),
        bodies.into_any(),
    ];
    let items: Vec<Bound<'py, PyAny>> = vec![
        scopes_list(py, &scan.kept.resources, &scan.kept.scopes)?.into_any(),
        scan.kept.skipped.into_pyobject(py)?.into_any(),
        scan.rows.into_pyobject(py)?.into_any(),
        PyBytes::new(py, &scan.times).into_any(),
        ids_list(py, &scan.ids)?.into_any(),
        text_list(py, &scan.severity_texts)?.into_any(),
        PyBytes::new(py, &scan.severity_index).into_any(),
        PyBytes::new(py, &scan.severity_numbers).into_any(),
        PyTuple::new(py, body)?.into_any(),
        attributes_tuple(py, &scan.attributes)?.into_any(),
    ];
    Ok(Some(PyTuple::new(py, items)?))
}

#[pymodule]
fn rootsift_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(scan_spans, m)?)?;
    m.add_function(wrap_pyfunction!(scan_logs, m)?)?;
    Ok(())
}
