//! Exactness oracle: loopctl 0.1.0 `InMemoryStore::retrieve` and `consolidate`
//! (src/memory/builtin.rs, see ../shared/seed/000_fe74d736ebf92ce7.txt),
//! copied as literally as the standard library allows, behind a line protocol.
//!
//! Build: `rustc -O --edition 2021 reference.rs -o reference` (std only).
//!
//! Every line on stdin and stdout is ASCII. A text field is written as `x`
//! followed by the lowercase hex of its UTF-8 bytes (`x` alone is the empty
//! string), so any text survives: NUL, newlines, every kind of whitespace.
//! A relevance is the 8 hex digits of its f32 bit pattern (`f32::from_bits`),
//! exactly what the crate stores; the caller rounds f64 to f32 itself
//! (Python: `struct.pack("<f", x)`, the same round-to-nearest-even as `x as f32`).
//!
//! Modes (first argument):
//!
//! * `oracle` (default) — commands, one a line, processed in order:
//!     `reset`                                    empty the store
//!     `entry <f32 bits> <memory> <n> <tag>...`   store an entry; entries are
//!                                                numbered 0, 1, 2... since the last reset
//!     `retrieve <limit> <query>`                 prints `r <index>...` (the returned
//!                                                entries, in order)
//!     `consolidate`                              prints `c <index>...` (the survivors,
//!                                                in store order)
//! * `score` — lines `<f64 bits, 16 hex> <matches> <word_count> <tagged 0|1>`;
//!   relevance is converted with `as f32`, then one entry built so that exactly
//!   `matches` of `word_count` query words occur in its memory (and a tag holds
//!   the whole query when tagged) is scored by the literal retrieve code.
//!   Prints the score's f32 bits (8 hex) per line.
//! * `parse` — lines of decimal text; prints the f32 bits of `text.parse::<f32>()`.
//! * `chars` — no input; prints `unicode <char::UNICODE_VERSION>`, then for
//!   every Unicode scalar value c one line
//!   `<c hex> <lowercase(c)> <lowercase("AΣ"+c)> <lowercase(c+"Σ")> <ws>` where ws
//!   is 1 when `c.is_whitespace()` (the property split_whitespace uses).
//! * `bench [repeat]` — reads `oracle` commands, stores the entries, then times
//!   every `retrieve` command `repeat` times (default 1). Prints timings only.
//! * `bench-synthetic <entries> <queries> [seed]` — generates ~100-character
//!   entries and 1..4-word queries (limit 10) with a fixed PRNG and times them.
//!
//! Bench output is one line of `key=value` pairs. `literal_ms_per_query` is the
//! crate's code as written (it clones a snapshot of every entry per retrieve);
//! `borrowed_ms_per_query` is the same scoring and stable sort over borrowed
//! entries, without that clone. The oracle mode checks that both agree.

use std::io::{self, BufRead, BufWriter, Read, Write};
use std::time::Instant;

/// The fields of loopctl's `MemoryEntry` that retrieve and consolidate read,
/// plus `index`, standing in for the entry's identity (`id`).
#[derive(Clone, Debug)]
struct MemoryEntry {
    index: usize,
    memory: String,
    tags: Vec<String>,
    relevance: f32,
}

struct InMemoryStore {
    entries: Vec<MemoryEntry>,
}

impl InMemoryStore {
    fn store(&mut self, entry: MemoryEntry) {
        self.entries.push(entry);
    }

    /// The body of the crate's `retrieve`, up to (not including) the final
    /// `.map(|(_, e)| e)`, so that the score can be inspected too.
    fn retrieve_scored(&self, query: &str, limit: usize) -> Vec<(f32, MemoryEntry)> {
        let query = query.to_string();
        // ---- copied from loopctl 0.1.0 src/memory/builtin.rs ----
        let query_lower = query.to_lowercase();
        let query_words: Vec<&str> = query_lower.split_whitespace().collect();

        let entries = &self.entries; // the crate: self.entries.read()
        let snapshot: Vec<MemoryEntry> = entries.iter().cloned().collect();
        let mut scored: Vec<(f32, MemoryEntry)> = snapshot
            .into_iter()
            .map(|entry| {
                let memory_lower = entry.memory.to_lowercase();
                let tag_match = entry
                    .tags
                    .iter()
                    .any(|t| t.to_lowercase().contains(&query_lower));
                let word_matches = query_words
                    .iter()
                    .filter(|w| memory_lower.contains(*w))
                    .count();
                let base_score = entry.relevance;
                #[allow(clippy::cast_precision_loss)]
                let query_bonus = if word_matches > 0 {
                    word_matches as f32 / query_words.len().max(1) as f32
                } else {
                    0.0
                };
                let tag_bonus = if tag_match { 0.3 } else { 0.0 };
                (
                    base_score * 0.5 + query_bonus * 0.4 + tag_bonus + 0.1,
                    entry,
                )
            })
            .collect();

        scored.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal));

        scored.into_iter().take(limit).collect()
        // ---- end of copy ----
    }

    /// The crate's `retrieve`: the entries, best first, at most `limit`.
    fn retrieve(&self, query: &str, limit: usize) -> Vec<MemoryEntry> {
        self.retrieve_scored(query, limit)
            .into_iter()
            .map(|(_, e)| e)
            .collect()
    }

    /// The same scoring and sort as `retrieve_scored`, over borrowed entries
    /// (no snapshot clone): only for the benchmark, checked against `retrieve`.
    fn retrieve_borrowed(&self, query: &str, limit: usize) -> Vec<usize> {
        let query_lower = query.to_lowercase();
        let query_words: Vec<&str> = query_lower.split_whitespace().collect();
        let mut scored: Vec<(f32, &MemoryEntry)> = self
            .entries
            .iter()
            .map(|entry| {
                let memory_lower = entry.memory.to_lowercase();
                let tag_match = entry
                    .tags
                    .iter()
                    .any(|t| t.to_lowercase().contains(&query_lower));
                let word_matches = query_words
                    .iter()
                    .filter(|w| memory_lower.contains(*w))
                    .count();
                let base_score = entry.relevance;
                let query_bonus = if word_matches > 0 {
                    word_matches as f32 / query_words.len().max(1) as f32
                } else {
                    0.0
                };
                let tag_bonus = if tag_match { 0.3 } else { 0.0 };
                (
                    base_score * 0.5 + query_bonus * 0.4 + tag_bonus + 0.1,
                    entry,
                )
            })
            .collect();
        scored.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal));
        scored.into_iter().take(limit).map(|(_, e)| e.index).collect()
    }

    /// The crate's `consolidate` (the stats are derivable from the survivors).
    fn consolidate(&mut self) {
        // ---- copied from loopctl 0.1.0 src/memory/builtin.rs ----
        let entries = &mut self.entries;
        entries.retain(|e| e.relevance >= 0.05);
        // ---- end of copy ----
    }
}

fn fail(message: String) -> ! {
    eprintln!("reference: {message}");
    std::process::exit(2)
}

fn decode_text(field: &str) -> String {
    let hex = field
        .strip_prefix('x')
        .unwrap_or_else(|| fail(format!("text field must start with 'x': {field:?}")));
    if hex.len() % 2 != 0 {
        fail(format!("odd hex length: {field:?}"));
    }
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&hex[i..i + 2], 16)
                .unwrap_or_else(|_| fail(format!("bad hex: {field:?}")))
        })
        .collect();
    String::from_utf8(bytes).unwrap_or_else(|_| fail(format!("not UTF-8: {field:?}")))
}

fn encode_text(text: &str) -> String {
    let mut out = String::with_capacity(1 + 2 * text.len());
    out.push('x');
    for byte in text.bytes() {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

fn parse_usize(field: Option<&str>, what: &str) -> usize {
    let field = field.unwrap_or_else(|| fail(format!("missing {what}")));
    field
        .parse()
        .unwrap_or_else(|_| fail(format!("bad {what}: {field:?}")))
}

fn parse_f32_bits(field: Option<&str>) -> f32 {
    let field = field.unwrap_or_else(|| fail("missing relevance".to_string()));
    if field.len() != 8 {
        fail(format!("relevance must be 8 hex digits: {field:?}"));
    }
    let bits =
        u32::from_str_radix(field, 16).unwrap_or_else(|_| fail(format!("bad relevance: {field:?}")));
    f32::from_bits(bits)
}

enum Command {
    Reset,
    Entry(MemoryEntry),
    Retrieve(usize, String),
    Consolidate,
}

fn parse_command(line: &str, next_index: usize) -> Command {
    let mut fields = line.split(' ');
    match fields.next() {
        Some("reset") => Command::Reset,
        Some("entry") => {
            let relevance = parse_f32_bits(fields.next());
            let memory = decode_text(fields.next().unwrap_or_else(|| fail("missing memory".into())));
            let count = parse_usize(fields.next(), "tag count");
            let tags = (0..count)
                .map(|_| decode_text(fields.next().unwrap_or_else(|| fail("missing tag".into()))))
                .collect();
            Command::Entry(MemoryEntry {
                index: next_index,
                memory,
                tags,
                relevance,
            })
        }
        Some("retrieve") => {
            let limit = parse_usize(fields.next(), "limit");
            let query = decode_text(fields.next().unwrap_or_else(|| fail("missing query".into())));
            Command::Retrieve(limit, query)
        }
        Some("consolidate") => Command::Consolidate,
        _ => fail(format!("unknown command: {line:?}")),
    }
}

fn write_indices(out: &mut impl Write, tag: &str, indices: impl Iterator<Item = usize>) {
    let mut line = String::from(tag);
    for index in indices {
        line.push(' ');
        line.push_str(&index.to_string());
    }
    line.push('\n');
    out.write_all(line.as_bytes()).unwrap();
}

fn read_lines() -> Vec<String> {
    let mut input = String::new();
    io::stdin()
        .read_to_string(&mut input)
        .unwrap_or_else(|e| fail(format!("stdin: {e}")));
    input.lines().filter(|l| !l.is_empty()).map(str::to_string).collect()
}

fn run_oracle() {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut store = InMemoryStore { entries: Vec::new() };
    let mut next_index = 0;
    for line in io::stdin().lock().lines() {
        let line = line.unwrap_or_else(|e| fail(format!("stdin: {e}")));
        if line.is_empty() {
            continue;
        }
        match parse_command(&line, next_index) {
            Command::Reset => {
                store.entries.clear();
                next_index = 0;
            }
            Command::Entry(entry) => {
                store.store(entry);
                next_index += 1;
            }
            Command::Retrieve(limit, query) => {
                let indices: Vec<usize> =
                    store.retrieve(&query, limit).iter().map(|e| e.index).collect();
                if store.retrieve_borrowed(&query, limit) != indices {
                    fail(format!("retrieve_borrowed disagrees with retrieve on {line:?}"));
                }
                write_indices(&mut out, "r", indices.into_iter());
            }
            Command::Consolidate => {
                store.consolidate();
                write_indices(&mut out, "c", store.entries.iter().map(|e| e.index));
            }
        }
    }
    out.flush().unwrap();
}

fn run_score() {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for line in read_lines() {
        let mut fields = line.split(' ');
        let bits = fields.next().unwrap_or_else(|| fail("missing relevance".into()));
        let bits = u64::from_str_radix(bits, 16).unwrap_or_else(|_| fail(format!("bad {line:?}")));
        let relevance = f64::from_bits(bits) as f32;
        let matches = parse_usize(fields.next(), "matches");
        let word_count = parse_usize(fields.next(), "word count");
        let tagged = parse_usize(fields.next(), "tagged") == 1;
        if matches > word_count || word_count > 20 {
            fail(format!("need matches <= word_count <= 20: {line:?}"));
        }
        // Words "qa", "qb", ... are not substrings of one another.
        let words: Vec<String> = (0..word_count)
            .map(|i| format!("q{}", (b'a' + i as u8) as char))
            .collect();
        let query = words.join(" ");
        let memory = words[..matches].join(" ");
        let tags = if tagged { vec![format!("<{query}>")] } else { Vec::new() };
        let store = InMemoryStore {
            entries: vec![MemoryEntry {
                index: 0,
                memory,
                tags,
                relevance,
            }],
        };
        let scored = store.retrieve_scored(&query, 1);
        writeln!(out, "{:08x}", scored[0].0.to_bits()).unwrap();
    }
    out.flush().unwrap();
}

fn run_parse() {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for line in read_lines() {
        let value: f32 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| fail(format!("not a number: {line:?}")));
        writeln!(out, "{:08x}", value.to_bits()).unwrap();
    }
    out.flush().unwrap();
}

fn run_chars() {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let (major, minor, update) = char::UNICODE_VERSION;
    writeln!(out, "unicode {major}.{minor}.{update}").unwrap();
    for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
        let alone = c.to_string();
        let after_sigma = format!("AΣ{c}");
        let before_sigma = format!("{c}Σ");
        writeln!(
            out,
            "{:x} {} {} {} {}",
            c as u32,
            encode_text(&alone.to_lowercase()),
            encode_text(&after_sigma.to_lowercase()),
            encode_text(&before_sigma.to_lowercase()),
            u8::from(c.is_whitespace())
        )
        .unwrap();
    }
    out.flush().unwrap();
}

struct Timing {
    literal_ms: f64,
    borrowed_ms: f64,
    checksum: usize,
}

fn time_queries(store: &InMemoryStore, queries: &[(usize, String)], repeat: usize) -> Timing {
    let mut checksum = 0usize;
    let start = Instant::now();
    for _ in 0..repeat {
        for (limit, query) in queries {
            let found = store.retrieve(query, *limit);
            checksum = checksum.wrapping_add(found.first().map_or(0, |e| e.index + 1));
        }
    }
    let literal = start.elapsed();
    let start = Instant::now();
    for _ in 0..repeat {
        for (limit, query) in queries {
            let found = store.retrieve_borrowed(query, *limit);
            checksum = checksum.wrapping_add(found.first().map_or(0, |i| i + 1));
        }
    }
    let borrowed = start.elapsed();
    let runs = (queries.len() * repeat).max(1) as f64;
    Timing {
        literal_ms: literal.as_secs_f64() * 1000.0 / runs,
        borrowed_ms: borrowed.as_secs_f64() * 1000.0 / runs,
        checksum,
    }
}

fn print_timing(entries: usize, queries: usize, repeat: usize, timing: &Timing) {
    println!(
        "entries={entries} queries={queries} repeat={repeat} \
         literal_ms_per_query={:.3} borrowed_ms_per_query={:.3} checksum={}",
        timing.literal_ms, timing.borrowed_ms, timing.checksum
    );
}

fn run_bench(args: &[String]) {
    let repeat = args.first().map_or(1, |r| parse_usize(Some(r), "repeat")).max(1);
    let mut store = InMemoryStore { entries: Vec::new() };
    let mut queries = Vec::new();
    for line in read_lines() {
        match parse_command(&line, store.entries.len()) {
            Command::Entry(entry) => store.store(entry),
            Command::Retrieve(limit, query) => queries.push((limit, query)),
            Command::Reset | Command::Consolidate => fail(format!("not in bench: {line:?}")),
        }
    }
    let timing = time_queries(&store, &queries, repeat);
    print_timing(store.entries.len(), queries.len(), repeat, &timing);
}

/// xorshift64*: a fixed, dependency-free PRNG for the synthetic benchmark.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn run_bench_synthetic(args: &[String]) {
    let entries = parse_usize(args.first().map(String::as_str), "entries");
    let query_count = parse_usize(args.get(1).map(String::as_str), "queries");
    let seed = args.get(2).map_or(1, |s| parse_usize(Some(s), "seed")) as u64;
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let syllables = [
        "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "gi", "fu", "he", "ju",
    ];
    let vocabulary: Vec<String> = (0..2000)
        .map(|_| {
            let n = 2 + rng.below(3);
            (0..n).map(|_| syllables[rng.below(syllables.len())]).collect()
        })
        .collect();
    let mut store = InMemoryStore { entries: Vec::with_capacity(entries) };
    for index in 0..entries {
        let mut memory = String::new();
        while memory.len() < 100 {
            if !memory.is_empty() {
                memory.push(' ');
            }
            let word = &vocabulary[rng.below(vocabulary.len())];
            if rng.below(8) == 0 {
                memory.push_str(&word.to_uppercase());
            } else {
                memory.push_str(word);
            }
        }
        let tags = (0..rng.below(3))
            .map(|_| vocabulary[rng.below(vocabulary.len())].clone())
            .collect();
        let relevance = rng.below(21) as f32 * 0.05;
        store.store(MemoryEntry {
            index,
            memory,
            tags,
            relevance,
        });
    }
    let queries: Vec<(usize, String)> = (0..query_count)
        .map(|_| {
            let n = 1 + rng.below(4);
            let words: Vec<&str> = (0..n)
                .map(|_| vocabulary[rng.below(vocabulary.len())].as_str())
                .collect();
            (10, words.join(" "))
        })
        .collect();
    let timing = time_queries(&store, &queries, 1);
    print_timing(entries, query_count, 1, &timing);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None | Some("oracle") => run_oracle(),
        Some("score") => run_score(),
        Some("parse") => run_parse(),
        Some("chars") => run_chars(),
        Some("bench") => run_bench(&args[1..]),
        Some("bench-synthetic") => run_bench_synthetic(&args[1..]),
        Some(other) => fail(format!("unknown mode {other:?}")),
    }
}
