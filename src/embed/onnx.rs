//! A small reader for the parts of an ONNX file the int8 encoder needs: the graph's node
//! kinds and its initializers (name, dims, element type, where the bytes are).
//!
//! Why not tract's decoder for this file: it reads the whole file into memory and then
//! decodes every tensor into a second copy, so loading the 23.5 MB int8 model held both
//! at once (peak RSS 66-68 MiB for `primd embed`, issue #17 asks ≤ 60) before our packed
//! weights were even made. Here the protobuf structure is walked through a buffered
//! reader that *skips* tensor payloads (only their offset and length are kept), and
//! [`OnnxFile::read`] later copies one payload straight into the buffer that keeps it:
//! no second copy of the model is ever held. tract still decodes the fp32 model (whose
//! graph it runs).
//!
//! Only what `models/fetch` writes is read: tensors with `raw_data` (or packed
//! `float_data`), element types FLOAT and INT8, no external data. The file is untrusted
//! input (a user points `--model` at it): every length is checked against the file's size
//! and its parent message, varints are bounded, strings limited, and any malformation is
//! an error naming what was wrong, never a panic (tests feed it truncations and random
//! bytes).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// ONNX `TensorProto.DataType` values read here.
pub(crate) const FLOAT: i32 = 1;
pub(crate) const UINT8: i32 = 2;
pub(crate) const INT8: i32 = 3;

/// Longest name or op type accepted (ONNX names in this graph are under 100 bytes).
const MAX_STRING: u64 = 4096;
/// Most dims of one tensor.
const MAX_DIMS: usize = 8;
/// Most nodes, and most initializers, of a graph (MiniLM-L6's int8 graph: 277 and 148):
/// a file of millions of tiny records is refused before it costs memory.
const MAX_RECORDS: usize = 100_000;

/// One node: what it computes, its name (for error messages) and the names of its
/// inputs (which initializer a quantized matmul reads: the reader's graph).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub op_type: String,
    pub name: String,
    pub inputs: Vec<String>,
}

/// Where an initializer's elements are in the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Initializer {
    pub dims: Vec<usize>,
    pub data_type: i32,
    /// Offset and length in bytes of the little-endian elements (`raw_data`, or the
    /// packed `float_data`).
    at: u64,
    len: u64,
    /// Elements of an 8-bit tensor kept in `int32_data` (how exporters store scalar zero
    /// points), one byte each, decoded while walking the file.
    inline: Option<Vec<u8>>,
}

/// Most elements of an 8-bit tensor kept in `int32_data` (such tensors are scalars and
/// small tables; the big ones are `raw_data`).
const MAX_INLINE: usize = 1 << 16;

/// The structure of an ONNX model file, with an open handle to read payloads.
pub(crate) struct OnnxFile<F = File> {
    file: F,
    pub nodes: Vec<Node>,
    pub initializers: HashMap<String, Initializer>,
}

impl OnnxFile {
    /// Walks the file's structure; reads no tensor payload.
    pub(crate) fn open(path: &Path) -> Result<Self, String> {
        let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
        let size = file
            .metadata()
            .map_err(|e| format!("cannot stat: {e}"))?
            .len();
        OnnxFile::parse(file, size)
    }
}

impl<F: Read + Seek> OnnxFile<F> {
    /// Walks the structure of the `size` bytes `file` holds (from its start).
    pub(crate) fn parse(file: F, size: u64) -> Result<Self, String> {
        let mut r = Reader {
            inner: BufReader::with_capacity(64 * 1024, file),
            pos: 0,
        };
        let (mut nodes, mut initializers) = (Vec::new(), HashMap::new());
        let mut graphs = 0;
        while r.pos < size {
            let (field, wire) = r.key()?;
            match (field, wire) {
                (7, LEN) => {
                    let end = r.len_end(size)?;
                    graphs += 1;
                    read_graph(&mut r, end, &mut nodes, &mut initializers)?;
                }
                _ => r.skip(wire, size)?,
            }
        }
        if graphs != 1 {
            return Err(format!("{graphs} graphs in the file: not an ONNX model"));
        }
        Ok(OnnxFile {
            file: r.inner.into_inner(),
            nodes,
            initializers,
        })
    }

    /// The elements of `init` as little-endian bytes, read straight from the file into
    /// a buffer of exactly their size.
    pub(crate) fn read(&mut self, init: &Initializer) -> Result<Vec<u8>, String> {
        if let Some(bytes) = &init.inline {
            return Ok(bytes.clone());
        }
        let len = usize::try_from(init.len).map_err(|_| "tensor too large".to_string())?;
        let mut buf = vec![0u8; len];
        self.file
            .seek(SeekFrom::Start(init.at))
            .and_then(|_| self.file.read_exact(&mut buf))
            .map_err(|e| format!("cannot read tensor bytes: {e}"))?;
        Ok(buf)
    }
}

const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;
const I32: u8 = 5;

/// A position-tracking protobuf reader.
struct Reader<F> {
    inner: BufReader<F>,
    pos: u64,
}

impl<F: Read + Seek> Reader<F> {
    fn byte(&mut self) -> Result<u8, String> {
        let mut b = [0u8];
        self.inner
            .read_exact(&mut b)
            .map_err(|_| format!("truncated at byte {}", self.pos))?;
        self.pos += 1;
        Ok(b[0])
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("varint longer than 10 bytes at {}", self.pos))
    }

    fn key(&mut self) -> Result<(u64, u8), String> {
        let k = self.varint()?;
        Ok((k >> 3, (k & 7) as u8))
    }

    /// Reads a length and returns where that field ends (checked against `limit`).
    fn len_end(&mut self, limit: u64) -> Result<u64, String> {
        let len = self.varint()?;
        match self.pos.checked_add(len) {
            Some(end) if end <= limit => Ok(end),
            _ => Err(format!(
                "a field of {len} bytes at {} runs past its message (ends at {limit})",
                self.pos
            )),
        }
    }

    fn seek_to(&mut self, to: u64) -> Result<(), String> {
        let by = i64::try_from(to - self.pos).map_err(|_| "offset too large".to_string())?;
        self.inner
            .seek_relative(by)
            .map_err(|e| format!("cannot seek: {e}"))?;
        self.pos = to;
        Ok(())
    }

    /// Skips a field of wire type `wire` whose key was just read.
    fn skip(&mut self, wire: u8, limit: u64) -> Result<(), String> {
        let end = match wire {
            VARINT => return self.varint().map(drop),
            I64 => self.pos + 8,
            I32 => self.pos + 4,
            LEN => self.len_end(limit)?,
            _ => return Err(format!("wire type {wire} at {}: not protobuf", self.pos)),
        };
        if end > limit {
            return Err(format!("truncated at byte {}", self.pos));
        }
        self.seek_to(end)
    }

    fn string(&mut self, limit: u64) -> Result<String, String> {
        let end = self.len_end(limit)?;
        if end - self.pos > MAX_STRING {
            return Err(format!(
                "a name of {} bytes at {}",
                end - self.pos,
                self.pos
            ));
        }
        let mut b = vec![0u8; (end - self.pos) as usize];
        self.inner
            .read_exact(&mut b)
            .map_err(|_| format!("truncated at byte {}", self.pos))?;
        self.pos = end;
        String::from_utf8(b).map_err(|_| format!("a name that is not UTF-8 before {end}"))
    }
}

fn read_graph<F: Read + Seek>(
    r: &mut Reader<F>,
    end: u64,
    nodes: &mut Vec<Node>,
    inits: &mut HashMap<String, Initializer>,
) -> Result<(), String> {
    while r.pos < end {
        let (field, wire) = r.key()?;
        match (field, wire) {
            (1, LEN) | (5, LEN) if nodes.len().max(inits.len()) == MAX_RECORDS => {
                return Err(format!("more than {MAX_RECORDS} nodes or initializers"));
            }
            (1, LEN) => {
                let node_end = r.len_end(end)?;
                nodes.push(read_node(r, node_end)?);
            }
            (5, LEN) => {
                let t_end = r.len_end(end)?;
                let (name, init) = read_tensor(r, t_end)?;
                if inits.insert(name.clone(), init).is_some() {
                    return Err(format!("initializer {name:?} appears twice"));
                }
            }
            _ => r.skip(wire, end)?,
        }
    }
    if r.pos != end {
        return Err(format!(
            "the graph's last field runs past it (at {})",
            r.pos
        ));
    }
    Ok(())
}

fn read_node<F: Read + Seek>(r: &mut Reader<F>, end: u64) -> Result<Node, String> {
    let mut node = Node {
        op_type: String::new(),
        name: String::new(),
        inputs: Vec::new(),
    };
    while r.pos < end {
        match r.key()? {
            (1, LEN) if node.inputs.len() == MAX_DIMS * 4 => {
                return Err(format!("a node with more than {} inputs", MAX_DIMS * 4));
            }
            (1, LEN) => node.inputs.push(r.string(end)?),
            (3, LEN) => node.name = r.string(end)?,
            (4, LEN) => node.op_type = r.string(end)?,
            (_, wire) => r.skip(wire, end)?,
        }
    }
    if r.pos != end {
        return Err(format!("a node's last field runs past it (at {})", r.pos));
    }
    Ok(node)
}

fn read_tensor<F: Read + Seek>(
    r: &mut Reader<F>,
    end: u64,
) -> Result<(String, Initializer), String> {
    let mut name = String::new();
    let mut init = Initializer {
        dims: Vec::new(),
        data_type: 0,
        at: 0,
        len: 0,
        inline: None,
    };
    let mut ints: Vec<u8> = Vec::new();
    let (mut has_data, mut external) = (false, false);
    let push_dim = |dims: &mut Vec<usize>, d: u64| -> Result<(), String> {
        // A negative int64 is a 10-byte varint above i64::MAX: refused with the huge ones.
        if dims.len() == MAX_DIMS || d > u64::from(u32::MAX) {
            return Err(format!(
                "a tensor dimension of {d} (or more than {MAX_DIMS} dims)"
            ));
        }
        dims.push(d as usize);
        Ok(())
    };
    while r.pos < end {
        match r.key()? {
            (1, VARINT) => push_dim(&mut init.dims, r.varint()?)?,
            (1, LEN) => {
                let dims_end = r.len_end(end)?;
                while r.pos < dims_end {
                    push_dim(&mut init.dims, r.varint()?)?;
                }
                if r.pos != dims_end {
                    return Err(format!("packed dims run past their field (at {})", r.pos));
                }
            }
            (2, VARINT) => init.data_type = r.varint()? as i32,
            (8, LEN) => name = r.string(end)?,
            // raw_data, or float_data packed: both little-endian elements.
            (9, LEN) | (4, LEN) => {
                let data_end = r.len_end(end)?;
                (init.at, init.len, has_data) = (r.pos, data_end - r.pos, true);
                r.seek_to(data_end)?;
            }
            // int32_data, packed or one by one: kept as bytes (8-bit tensors only).
            (5, LEN) => {
                let ints_end = r.len_end(end)?;
                while r.pos < ints_end {
                    if ints.len() == MAX_INLINE {
                        return Err(format!("more than {MAX_INLINE} int32_data elements"));
                    }
                    ints.push(r.varint()? as u8);
                }
                if r.pos != ints_end {
                    return Err(format!(
                        "packed int32_data runs past its field (at {})",
                        r.pos
                    ));
                }
            }
            (5, VARINT) if ints.len() < MAX_INLINE => ints.push(r.varint()? as u8),
            (14, VARINT) => external = r.varint()? == 1,
            (_, wire) => r.skip(wire, end)?,
        }
    }
    if r.pos != end {
        return Err(format!("a tensor's last field runs past it (at {})", r.pos));
    }
    if external {
        return Err(format!(
            "initializer {name:?} keeps its data in an external file: not supported"
        ));
    }
    let width = match init.data_type {
        FLOAT => 4,
        INT8 | UINT8 => 1,
        _ => 0, // other types are never read; `Initializers` refuses them by name
    };
    let count = init
        .dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d as u64));
    if !has_data && !ints.is_empty() && matches!(init.data_type, INT8 | UINT8) {
        (init.len, has_data) = (ints.len() as u64, true);
        init.inline = Some(ints);
    }
    if width > 0 && !has_data {
        return Err(format!(
            "initializer {name:?} keeps its values in a typed field other than raw_data \
             (or has none): re-run models/fetch, whose files primd reads"
        ));
    }
    if width > 0 && count.and_then(|c| c.checked_mul(width)) != Some(init.len) {
        return Err(format!(
            "initializer {name:?}: dims {:?} but {} bytes of data",
            init.dims, init.len
        ));
    }
    Ok((name, init))
}

/// The `onnx` fuzz target's body (`fuzz/`; `cargo test` runs its saved corpus through
/// it too): parse `data` as a model file, read every initializer it accepted, and check
/// that whatever was accepted is consistent with the file.
#[doc(hidden)]
pub fn fuzz_bytes(data: &[u8]) {
    let Ok(mut f) = OnnxFile::parse(std::io::Cursor::new(data), data.len() as u64) else {
        return;
    };
    let inits: Vec<Initializer> = f.initializers.values().cloned().collect();
    for init in inits {
        assert!(
            init.at + init.len <= data.len() as u64,
            "data past the file's end"
        );
        assert!(init.dims.len() <= MAX_DIMS);
        let bytes = f
            .read(&init)
            .expect("an accepted tensor's bytes are in the file");
        assert_eq!(bytes.len() as u64, init.len);
    }
    assert!(f.nodes.len() <= MAX_RECORDS && f.initializers.len() <= MAX_RECORDS);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    /// Protobuf encoding helpers (the writer side, for hand-made files).
    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    fn field_len(field: u64, body: &[u8], out: &mut Vec<u8>) {
        varint(field << 3 | 2, out);
        varint(body.len() as u64, out);
        out.extend_from_slice(body);
    }
    fn field_varint(field: u64, v: u64, out: &mut Vec<u8>) {
        varint(field << 3, out);
        varint(v, out);
    }
    fn tensor(name: &str, dims: &[u64], dt: i32, raw: &[u8]) -> Vec<u8> {
        let mut t = Vec::new();
        for &d in dims {
            field_varint(1, d, &mut t);
        }
        field_varint(2, dt as u64, &mut t);
        field_len(8, name.as_bytes(), &mut t);
        field_len(9, raw, &mut t);
        t
    }
    fn node(op: &str, name: &str) -> Vec<u8> {
        let mut n = Vec::new();
        field_len(1, b"input0", &mut n); // an input name: skipped
        field_len(3, name.as_bytes(), &mut n);
        field_len(4, op.as_bytes(), &mut n);
        n
    }
    /// A model: ir_version, a graph with two nodes and three initializers, opset.
    fn model() -> Vec<u8> {
        let mut g = Vec::new();
        field_len(1, &node("Add", "add0"), &mut g);
        field_len(2, b"graph-name", &mut g);
        let floats: Vec<u8> = [1.5f32, -2.0, 0.25, 8.0, 0.0, -1.0]
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect();
        field_len(5, &tensor("w", &[2, 3], FLOAT, &floats), &mut g);
        field_len(1, &node("PrimdInt8Linear", "lin0"), &mut g);
        field_len(5, &tensor("q", &[4], INT8, &[1, 0xff, 0x80, 7]), &mut g);
        let mut packed = Vec::new(); // float_data, packed, and dims packed
        let mut dims = Vec::new();
        varint(1, &mut dims);
        field_len(1, &dims, &mut packed);
        field_varint(2, FLOAT as u64, &mut packed);
        field_len(4, &3.0f32.to_le_bytes(), &mut packed);
        field_len(8, b"s", &mut packed);
        field_len(5, &packed, &mut g);
        let mut m = Vec::new();
        field_varint(1, 8, &mut m);
        field_len(7, &g, &mut m);
        let mut opset = Vec::new();
        field_varint(2, 13, &mut opset);
        field_len(8, &opset, &mut m);
        m
    }

    fn write(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.onnx");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    #[test]
    fn reads_nodes_dims_and_tensor_bytes_of_a_hand_made_model() {
        let (_d, path) = write(&model());
        let mut f = OnnxFile::open(&path).unwrap();
        let ops: Vec<&str> = f.nodes.iter().map(|n| n.op_type.as_str()).collect();
        assert_eq!(ops, ["Add", "PrimdInt8Linear"]);
        assert_eq!(f.nodes[1].name, "lin0");
        let w = f.initializers["w"].clone();
        assert_eq!((w.dims.as_slice(), w.data_type), (&[2usize, 3][..], FLOAT));
        let bytes = f.read(&w).unwrap();
        let vals: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(vals, [1.5, -2.0, 0.25, 8.0, 0.0, -1.0]);
        let q = f.initializers["q"].clone();
        assert_eq!(f.read(&q).unwrap(), [1, 0xff, 0x80, 7]);
        let s = f.initializers["s"].clone();
        assert_eq!(
            (s.dims.as_slice(), f.read(&s).unwrap()),
            (&[1usize][..], 3.0f32.to_le_bytes().to_vec())
        );
    }

    fn parse(bytes: &[u8]) -> Result<OnnxFile<std::io::Cursor<&[u8]>>, String> {
        OnnxFile::parse(std::io::Cursor::new(bytes), bytes.len() as u64)
    }

    #[test]
    fn every_truncation_and_random_bytes_are_errors_not_panics() {
        let m = model();
        // Every cut is refused but the one right after the graph: it loses only the
        // opset, a field this reader never needs (a whole, valid protobuf message).
        let graph_end = m.len() - 4;
        for cut in 0..m.len() {
            assert_eq!(parse(&m[..cut]).is_err(), cut != graph_end, "cut at {cut}");
        }
        let (_d, path) = write(&m[..m.len() / 2]);
        assert!(OnnxFile::open(&path).is_err(), "a truncated file");
        let mut rng = Rng::new(5);
        let all: Vec<u8> = (0..=255).collect();
        for i in 0..20_000 {
            let mut bytes = m.clone();
            for _ in 0..1 + rng.index(4) {
                let at = rng.index(bytes.len());
                bytes[at] = rng.next() as u8;
            }
            if i % 4 == 0 {
                let n = rng.index(200);
                bytes = rng.bytes(n, &all);
            }
            if let Ok(mut f) = parse(&bytes) {
                for init in f.initializers.clone().values() {
                    let _ = f.read(init);
                }
            }
        }
    }

    #[test]
    fn a_file_of_endless_tiny_records_is_refused() {
        let mut g = Vec::new();
        for _ in 0..=MAX_RECORDS {
            field_len(1, b"", &mut g);
        }
        let mut m = Vec::new();
        field_len(7, &g, &mut m);
        assert!(parse(&m).err().unwrap().contains("more than 100000"));
    }

    #[test]
    fn a_model_written_by_the_onnx_package_reads_back() {
        // fuzz/seeds/onnx/*.onnx were written by the `onnx` Python package (1.23), the
        // encoder `models/fetch` uses: its scalar in float_data, int64 dims, raw_data.
        let seed = include_bytes!("../../fuzz/seeds/onnx/tiny-int8-linear.onnx");
        let mut f = parse(seed).unwrap();
        let ops: Vec<&str> = f.nodes.iter().map(|n| n.op_type.as_str()).collect();
        assert_eq!(ops, ["PrimdInt8Linear", "Erf", "Add"]);
        let w = f.initializers["lin.weight"].clone();
        assert_eq!((w.dims.as_slice(), w.data_type), (&[4usize, 4][..], INT8));
        let want: Vec<u8> = (-8i8..8).map(|v| v as u8).collect();
        assert_eq!(f.read(&w).unwrap(), want);
        let eps = f.initializers["ln_eps"].clone();
        assert_eq!(
            (eps.dims.len(), f.read(&eps).unwrap()),
            (0, 1e-12f32.to_le_bytes().to_vec())
        );
        let bias = f.initializers["lin.bias"].clone();
        let b: Vec<f32> = f
            .read(&bias)
            .unwrap()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(b, [0.0, 1.0, -1.0, 3.5]);
        assert_eq!(f.initializers.len(), 5);
        let ext = include_bytes!("../../fuzz/seeds/onnx/external-data.onnx");
        assert!(parse(ext).err().unwrap().contains("external"));
        let bad = include_bytes!("../../fuzz/seeds/onnx/dims-mismatch.onnx");
        assert!(parse(bad).err().unwrap().contains("\"bad\""));
    }

    #[test]
    fn a_tensor_whose_bytes_do_not_match_its_dims_is_refused_by_name() {
        let mut g = Vec::new();
        field_len(5, &tensor("bad", &[2, 2], FLOAT, &[0u8; 12]), &mut g);
        let mut m = Vec::new();
        field_len(7, &g, &mut m);
        let (_d, path) = write(&m);
        let err = OnnxFile::open(&path).err().unwrap();
        assert!(err.contains("\"bad\"") && err.contains("12 bytes"), "{err}");
    }

    #[test]
    fn external_data_and_non_models_are_refused() {
        let mut t = tensor("ext", &[1], FLOAT, &[0u8; 4]);
        field_varint(14, 1, &mut t);
        let mut g = Vec::new();
        field_len(5, &t, &mut g);
        let mut m = Vec::new();
        field_len(7, &g, &mut m);
        let (_d, path) = write(&m);
        assert!(OnnxFile::open(&path).err().unwrap().contains("external"));
        let (_d, path) = write(b"{\"not\": \"onnx\"}");
        assert!(OnnxFile::open(&path).is_err());
        let (_d, path) = write(b"");
        assert!(OnnxFile::open(&path).err().unwrap().contains("0 graphs"));
    }
}
