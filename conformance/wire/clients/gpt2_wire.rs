//! gpt2_wire.rs - GPT-2's token + position embedding and its tied output head, served over the
//! gpt2-conformance wire protocol (version 1). One file, the standard library only:
//!
//!     rustc --edition 2021 -O -o gpt2_wire_rs gpt2_wire.rs
//!     gpt2-conformance run --exec ./gpt2_wire_rs
//!
//!     h[b, t]  = wte[ids[b, t]] + wpe[past_length + t]      wte [50257, d], wpe [1024, d]
//!     logits   = h_final @ wte^T                            the head is wte itself (tied)
//!
//! The suite writes requests to stdin and reads one response per request from stdout. A message
//! is one line of JSON (the header) followed by the raw bytes of the arrays it lists; the suite's
//! tables come as files of the shared-memory folder the hello offers. stdout carries the protocol
//! only (anything for a human goes to stderr); the process ends at the end of stdin.
//! The protocol: the package's wire/protocol-1.schema.json and docs/any-language.md.
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};

const N_VOCAB: usize = 50257;
const N_CTX: usize = 1024;
const HEAD_ROWS: usize = 64; // wte rows kept in cache while every h row meets them

// ---- a tiny JSON reader: enough for the suite's request headers -------------------------
enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn text(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
    fn int(&self) -> Option<i64> {
        match self {
            Json::Num(n) => n.parse().ok(),
            _ => None,
        }
    }
    fn items(&self) -> &[Json] {
        match self {
            Json::Arr(items) => items,
            _ => &[],
        }
    }
}

fn parse(s: &[u8], i: &mut usize) -> Option<Json> {
    while *i < s.len() && s[*i].is_ascii_whitespace() {
        *i += 1;
    }
    let c = *s.get(*i)?;
    if c == b'{' || c == b'[' {
        let close = if c == b'{' { b'}' } else { b']' };
        *i += 1;
        let (mut fields, mut items) = (Vec::new(), Vec::new());
        loop {
            while s.get(*i)?.is_ascii_whitespace() {
                *i += 1;
            }
            if s[*i] == close && fields.is_empty() && items.is_empty() {
                *i += 1;
                break;
            }
            if c == b'{' {
                let key = match parse(s, i)? {
                    Json::Str(k) => k,
                    _ => return None,
                };
                while s.get(*i)?.is_ascii_whitespace() {
                    *i += 1;
                }
                if s[*i] != b':' {
                    return None;
                }
                *i += 1;
                fields.push((key, parse(s, i)?));
            } else {
                items.push(parse(s, i)?);
            }
            while s.get(*i)?.is_ascii_whitespace() {
                *i += 1;
            }
            *i += 1;
            match s[*i - 1] {
                b',' => continue,
                x if x == close => break,
                _ => return None,
            }
        }
        return Some(if c == b'{' { Json::Obj(fields) } else { Json::Arr(items) });
    }
    if c == b'"' {
        let mut out = String::new();
        *i += 1;
        while *s.get(*i)? != b'"' {
            if s[*i] == b'\\' {
                *i += 1;
            }
            out.push(*s.get(*i)? as char);
            *i += 1;
        }
        *i += 1;
        return Some(Json::Str(out));
    }
    for (word, value) in [("true", Json::Bool(true)), ("false", Json::Bool(false)), ("null", Json::Null)] {
        if s[*i..].starts_with(word.as_bytes()) {
            *i += word.len();
            return Some(value);
        }
    }
    let start = *i;
    while *i < s.len() && b"+-0123456789.eE".contains(&s[*i]) {
        *i += 1;
    }
    if *i == start {
        return None;
    }
    Some(Json::Num(String::from_utf8_lossy(&s[start..*i]).into_owned()))
}

// ---- errors: the response a refused request gets ------------------------------------------
struct Refusal {
    kind: &'static str,
    message: String,
}
type Answer = Result<Vec<Out>, Refusal>;

fn fail<T>(kind: &'static str, message: String) -> Result<T, Refusal> {
    Err(Refusal { kind, message })
}

// ---- arrays --------------------------------------------------------------------------------
struct Array {
    name: String,
    dtype: String,
    shape: Vec<usize>,
    data: Vec<f32>, // the bytes, in a buffer of f32s (aligned for float32 arrays)
    nbytes: usize,
}

impl Array {
    fn bytes(&self) -> &[u8] {
        as_bytes(&self.data, self.nbytes)
    }
    fn ids(&self) -> Vec<i64> {
        match self.dtype.as_str() {
            "int64" => self.bytes().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect(),
            _ => self.bytes().chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap()) as i64).collect(),
        }
    }
    fn shape_text(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(|n| n.to_string()).collect();
        if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) }
    }
    fn check_float(&self, shape: &[Option<usize>], want: &str) -> Result<&[f32], Refusal> {
        if self.dtype != "float32" {
            return fail("TypeError", format!("{}.dtype={}, but should be float32", self.name, self.dtype));
        }
        let fits = self.shape.len() == shape.len() && self.shape.iter().zip(shape).all(|(a, b)| b.map_or(true, |b| *a == b));
        if !fits {
            return fail("ValueError", format!("{}.shape={}, but should be {}", self.name, self.shape_text(), want));
        }
        Ok(&self.data)
    }
}

fn as_bytes(data: &[f32], nbytes: usize) -> &[u8] {
    // the host is little-endian, as the wire is: a float32's bytes in memory are its bytes on the wire
    unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, nbytes) }
}

fn as_bytes_mut(data: &mut [f32], nbytes: usize) -> &mut [u8] {
    unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr() as *mut u8, nbytes) }
}

fn read_array(desc: &Json, stdin: &mut impl Read, shm: &Option<String>) -> io::Result<Array> {
    let text = |k: &str| desc.get(k).and_then(Json::text).unwrap_or("").to_string();
    let nbytes = desc.get("nbytes").and_then(Json::int).unwrap_or(0) as usize;
    let mut data = vec![0f32; (nbytes + 3) / 4];
    match (desc.get("file").and_then(Json::text), shm) {
        (Some(file), Some(dir)) => File::open(format!("{dir}/{file}"))?.read_exact(as_bytes_mut(&mut data, nbytes))?,
        _ => stdin.read_exact(as_bytes_mut(&mut data, nbytes))?,
    }
    let shape = desc.get("shape").map(Json::items).unwrap_or(&[]).iter().map(|n| n.int().unwrap_or(0) as usize).collect();
    Ok(Array { name: text("name"), dtype: text("dtype"), shape, data, nbytes })
}

/// An answer's array: float32, C order.
struct Out {
    name: &'static str,
    shape: Vec<usize>,
    data: Vec<f32>,
}

// ---- the model -----------------------------------------------------------------------------
struct Model {
    d: usize,
    wte: Vec<f32>, // [N_VOCAB, d]
    wpe: Vec<f32>, // [N_CTX, d]
}

fn past_length(arg: Option<&Json>) -> Result<usize, Refusal> {
    let Some(arg) = arg else { return Ok(0) }; // embed(ids): the default, 0
    let value = arg.get("value");
    match (arg.get("type").and_then(Json::text), value) {
        (Some("int"), Some(v)) => match v.int() {
            Some(p) if p >= 0 => Ok(p as usize),
            Some(p) => fail("ValueError", format!("past_length={p} must be >= 0")),
            None => fail("ValueError", "past_length is not an integer".into()),
        },
        (_, Some(Json::Bool(b))) => fail("TypeError", format!("past_length={} (bool) must be an integer >= 0", if *b { "True" } else { "False" })),
        (_, Some(Json::Num(n))) => fail("TypeError", format!("past_length={n} (float) must be an integer >= 0")),
        _ => fail("TypeError", "past_length must be an integer >= 0".into()),
    }
}

/// The ids as (B, T, values), after every check, each refusal naming the value and the rule.
fn checked_ids(ids: &Array, past: usize) -> Result<(usize, usize, Vec<usize>), Refusal> {
    if ids.dtype != "int32" && ids.dtype != "int64" {
        return fail("TypeError", format!("ids must be an integer array (int32 or int64), got dtype {}", ids.dtype));
    }
    if ids.shape.len() != 2 {
        return fail("ValueError", format!("ids must have rank 2 [B, T], got shape {}", ids.shape_text()));
    }
    let (batch, seq) = (ids.shape[0], ids.shape[1]);
    if seq > 0 && past + seq > N_CTX {
        return fail(
            "PositionOutOfRange",
            format!("position {} is outside the wpe table [0, {N_CTX}): past_length={past} + T={seq} tokens", past.max(N_CTX)),
        );
    }
    let mut out = Vec::with_capacity(batch * seq);
    for (i, id) in ids.ids().into_iter().enumerate() {
        if id < 0 || id >= N_VOCAB as i64 {
            return fail("TokenOutOfRange", format!("token id {id} at ids[{}, {}] is outside the wte table [0, {N_VOCAB})", i / seq, i % seq));
        }
        out.push(id as usize);
    }
    Ok((batch, seq, out))
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut s = [0f32; 8]; // eight running sums: vectorisable
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let rest: f32 = ac.remainder().iter().zip(bc.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ac.zip(bc) {
        for k in 0..8 {
            s[k] += x[k] * y[k];
        }
    }
    ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + rest
}

impl Model {
    fn embed_into(&self, h: &mut [f32], ids: &[usize], seq: usize, past: usize) {
        let d = self.d;
        for (i, &id) in ids.iter().enumerate() {
            let (row, pos) = (&self.wte[id * d..][..d], &self.wpe[(past + i % seq) * d..][..d]);
            for j in 0..d {
                h[i * d + j] = row[j] + pos[j]; // one float32 addition each
            }
        }
    }

    fn embed(&self, req: &Json, a: &[Array]) -> Answer {
        let past = past_length(req.get("past_length"))?;
        let (batch, seq, ids) = checked_ids(&a[0], past)?;
        let mut h = vec![0f32; batch * seq * self.d];
        self.embed_into(&mut h, &ids, seq, past);
        Ok(vec![Out { name: "h", shape: vec![batch, seq, self.d], data: h }])
    }

    fn logits(&self, a: &[Array]) -> Answer {
        let d = self.d;
        let h = a[0].check_float(&[None, None, Some(d)], &format!("(B, T, {d})"))?;
        let n = h.len() / d;
        let mut out = vec![0f32; n * N_VOCAB];
        for r0 in (0..N_VOCAB).step_by(HEAD_ROWS) {
            for i in 0..n {
                for r in r0..(r0 + HEAD_ROWS).min(N_VOCAB) {
                    out[i * N_VOCAB + r] = dot(&h[i * d..][..d], &self.wte[r * d..][..d]);
                }
            }
        }
        Ok(vec![Out { name: "logits", shape: vec![a[0].shape[0], a[0].shape[1], N_VOCAB], data: out }])
    }

    fn gradients(&self, req: &Json, a: &[Array]) -> Answer {
        let d = self.d;
        let past = past_length(req.get("past_length"))?;
        let (batch, seq, ids) = checked_ids(&a[0], past)?;
        let ch = a[1].check_float(&[Some(batch), Some(seq), Some(d)], "[B, T, d] as ids")?;
        let cl = a[2].check_float(&[Some(batch), Some(seq), Some(N_VOCAB)], "[B, T, 50257] as ids")?;
        let n = batch * seq;
        let mut h = vec![0f32; n * d];
        self.embed_into(&mut h, &ids, seq, past);
        let mut dh = ch.to_vec();
        let mut gw = vec![0f32; N_VOCAB * d];
        for r in 0..N_VOCAB {
            // L = <ch, h> + <cl, h wte^T>: the head's two roles
            let w = &self.wte[r * d..][..d];
            for i in 0..n {
                let c = cl[i * N_VOCAB + r];
                if c != 0.0 {
                    for j in 0..d {
                        dh[i * d + j] += c * w[j];
                        gw[r * d + j] += c * h[i * d + j];
                    }
                }
            }
        }
        let mut gp = vec![0f32; N_CTX * d];
        for (i, &id) in ids.iter().enumerate() {
            // the gather's role: dL/dh back to the rows it read
            let p = past + i % seq;
            for j in 0..d {
                gw[id * d + j] += dh[i * d + j];
                gp[p * d + j] += dh[i * d + j];
            }
        }
        Ok(vec![Out { name: "grad_wte", shape: vec![N_VOCAB, d], data: gw }, Out { name: "grad_wpe", shape: vec![N_CTX, d], data: gp }])
    }

    fn load_tables(&mut self, a: &mut [Array]) -> Answer {
        let d = self.d;
        a[0].check_float(&[Some(N_VOCAB), Some(d)], &format!("({N_VOCAB}, {d})"))?;
        a[1].check_float(&[Some(N_CTX), Some(d)], &format!("({N_CTX}, {d})"))?;
        self.wte = std::mem::take(&mut a[0].data); // the arrays just read are ours: no copy
        self.wpe = std::mem::take(&mut a[1].data);
        Ok(vec![])
    }

    fn init_tables(&mut self, req: &Json) -> Answer {
        let seed = req.get("seed");
        if seed.and_then(|s| s.get("type")).and_then(Json::text) != Some("int") {
            return fail("TypeError", "seed must be an integer".into());
        }
        let mut state = seed.and_then(|s| s.get("value")).and_then(Json::int).unwrap_or(0) as u64;
        let mut uniform = move || {
            // splitmix64, 53 bits, in (0, 1)
            state = state.wrapping_add(0x9E3779B97F4A7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
            (((z ^ (z >> 31)) >> 11) as f64 + 0.5) / 9007199254740992.0
        };
        // model(): wte ~ N(0, 0.02^2), wpe ~ N(0, 0.01^2), plain normals (Box-Muller)
        for (table, std) in [(&mut self.wte, 0.02), (&mut self.wpe, 0.01)] {
            for pair in table.chunks_mut(2) {
                let (r, t) = (std * (-2.0 * uniform().ln()).sqrt(), std::f64::consts::TAU * uniform());
                pair[0] = (r * t.cos()) as f32;
                if pair.len() > 1 {
                    pair[1] = (r * t.sin()) as f32;
                }
            }
        }
        Ok(vec![])
    }

    fn assign_wte_row(&mut self, req: &Json, a: &[Array]) -> Answer {
        let index = req.get("index");
        if index.and_then(|s| s.get("type")).and_then(Json::text) != Some("int") {
            return fail("TypeError", "index must be an integer".into());
        }
        let row = index.and_then(|s| s.get("value")).and_then(Json::int).unwrap_or(-1);
        if row < 0 || row >= N_VOCAB as i64 {
            return fail("IndexError", format!("row {row} is outside the wte table [0, {N_VOCAB})"));
        }
        let d = self.d;
        let values = a[0].check_float(&[Some(d)], &format!("({d},)"))?;
        self.wte[row as usize * d..][..d].copy_from_slice(values);
        Ok(vec![])
    }
}

// ---- the conversation ------------------------------------------------------------------------
fn escape(s: &str) -> String {
    s.chars().map(|c| if c == '"' || c == '\\' { format!("\\{c}") } else if c.is_control() { " ".into() } else { c.to_string() }).collect()
}

fn main() -> io::Result<()> {
    let mut stdin = BufReader::with_capacity(1 << 16, io::stdin().lock());
    let mut stdout = io::stdout().lock();
    let mut model = Model { d: 768, wte: vec![], wpe: vec![] };
    let mut shm: Option<String> = None;
    let mut line = Vec::new();
    loop {
        line.clear();
        if stdin.read_until(b'\n', &mut line)? == 0 {
            return Ok(()); // the end of stdin: done
        }
        let req = parse(&line, &mut 0).unwrap_or(Json::Null);
        let mut arrays = Vec::new();
        for desc in req.get("arrays").map(Json::items).unwrap_or(&[]) {
            arrays.push(read_array(desc, &mut stdin, &shm)?); // every array is read, even of a refused request
        }
        let call = req.get("call").and_then(Json::text).unwrap_or("");
        let needed = match call {
            "load_tables" => 2,
            "gradients" => 3,
            "embed" | "logits" | "assign_wte_row" => 1,
            _ => 0,
        };
        let answer = if arrays.len() < needed {
            fail("ValueError", format!("{call} needs {needed} array(s), got {}", arrays.len()))
        } else {
            match call {
                "hello" => match req.get("config") {
                    Some(c @ Json::Obj(_)) if c.get("dtype").and_then(Json::text) != Some("float32") => {
                        fail("ValueError", format!("dtype {} is not claimed: float32 only", c.get("dtype").and_then(Json::text).unwrap_or("?")))
                    }
                    config => {
                        if let Some(c @ Json::Obj(_)) = config {
                            let d = c.get("n_embd").and_then(Json::int).unwrap_or(768) as usize;
                            model = Model { d, wte: vec![0f32; N_VOCAB * d], wpe: vec![0f32; N_CTX * d] };
                        }
                        shm = req.get("shm").and_then(Json::text).map(str::to_string);
                        Ok(vec![])
                    }
                },
                "parameters" | "load_tables" | "tables" | "init_tables" | "assign_wte_row" if model.wte.is_empty() => {
                    fail("RuntimeError", "no model: the hello had no config".into())
                }
                "embed" => model.embed(&req, &arrays),
                "logits" => model.logits(&arrays),
                "gradients" => model.gradients(&req, &arrays),
                "load_tables" => model.load_tables(&mut arrays),
                "init_tables" => model.init_tables(&req),
                "assign_wte_row" => model.assign_wte_row(&req, &arrays),
                "tables" => Ok(vec![
                    Out { name: "wte", shape: vec![N_VOCAB, model.d], data: model.wte.clone() },
                    Out { name: "wpe", shape: vec![N_CTX, model.d], data: model.wpe.clone() },
                ]),
                "parameters" => Ok(vec![]),
                _ => fail("ValueError", format!("unknown call {call:?}")),
            }
        };
        let head = match (&answer, call) {
            (Err(e), _) => format!("{{\"ok\":false,\"error\":{{\"kind\":\"{}\",\"message\":\"{}\"}}}}", e.kind, escape(&e.message)),
            (Ok(_), "hello") => format!(
                "{{\"ok\":true,\"protocol\":1,\"implementation\":\"gpt2-wire-rust\",\"version\":\"1.0\",\
                 \"capabilities\":{{\"dtypes\":[\"float32\"],\"devices\":[\"cpu\"],\"sizes\":[768,1024,1280,1600],\
                 \"kv_cache\":true,\"tied_head\":true,\"init\":true,\"gradients\":true,\"mutable_tables\":true}},\
                 \"errors\":{{\"TokenOutOfRange\":\"IndexError\",\"PositionOutOfRange\":\"IndexError\"}},\"shm\":{}}}",
                shm.is_some()
            ),
            (Ok(_), "parameters") => {
                format!("{{\"ok\":true,\"parameters\":{{\"wte\":[{N_VOCAB},{d}],\"wpe\":[{N_CTX},{d}]}}}}", d = model.d)
            }
            (Ok(outs), _) => {
                let descs: Vec<String> = outs
                    .iter()
                    .map(|out| {
                        let shape: Vec<String> = out.shape.iter().map(|n| n.to_string()).collect();
                        format!(
                            "{{\"name\":\"{}\",\"dtype\":\"float32\",\"shape\":[{}],\"byteorder\":\"little\",\"nbytes\":{}}}",
                            out.name,
                            shape.join(","),
                            out.data.len() * 4
                        )
                    })
                    .collect();
                format!("{{\"ok\":true,\"arrays\":[{}]}}", descs.join(","))
            }
        };
        stdout.write_all(head.as_bytes())?;
        stdout.write_all(b"\n")?;
        if let Ok(outs) = &answer {
            for out in outs {
                stdout.write_all(as_bytes(&out.data, out.data.len() * 4))?; // after the header, in the pipe
            }
        }
        stdout.flush()?;
    }
}
