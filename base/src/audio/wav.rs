//! The seconds of a RIFF/WAVE file, from its samples: the header's fields
//! are checked against each other and against the bytes the file holds,
//! and a header that disagrees with itself or with the bytes is refused
//! ([`Refused`]), never believed.
//!
//! Why: a provider decodes the file by its header, the gateway bills it by
//! its header; where the fields disagree (a `block_align` of 1000 for
//! 16-bit mono, a byte rate that is not rate × `block_align`, a sample rate
//! of 8 MHz) the two readings differ, and a minute of audio was billed
//! 0.12 s. A consistent header is read the same way by both.
//!
//! What is checked, in order:
//!
//! * a `fmt ` chunk (at least 16 bytes) before the `data` chunk, among the
//!   first [`MAX_CHUNKS`] chunks;
//! * the format: integer PCM, IEEE float, A-law or µ-law, plain or as
//!   `WAVE_FORMAT_EXTENSIBLE` (its sub-format GUID, its valid bits at most
//!   its container's); any other format (ADPCM, GSM, MPEG, ...) is
//!   [`WavSeconds::Compressed`]: its seconds cannot be counted from its
//!   bytes, and its header is not judged;
//! * 1 to [`MAX_CHANNELS`] channels; a sample rate of [`MIN_RATE`] to
//!   [`MAX_RATE`] Hz; bits per sample a size of the format's samples (PCM
//!   8, 16, 24, 32; float 32, 64; A-law and µ-law 8);
//! * `block_align` = channels × bytes per sample, and the byte rate =
//!   sample rate × `block_align`;
//! * the `data` size against the file: a size the file holds and that is
//!   followed by whole chunks (a `LIST`, a pad byte) is the data; a size of
//!   0, or one reaching to or past the end of the file (`0xFFFFFFFF`,
//!   `0x7FFFFFFF`: a WAV written as a stream, a recording cut off) means
//!   every byte to the end of the file is data, as decoders read it; a
//!   smaller size followed by bytes that are not chunks is refused;
//! * the data is whole frames (a multiple of `block_align`).
//!
//! The seconds are frames ÷ sample rate, exact to 8 places
//! ([`seconds_of`]). The RIFF size field is not used (decoders do
//! not use it either).
//!
//! `hound` (used by the tests to write WAVs) reads headers too, but does not
//! check what is needed here: it takes a `block_align` of 1000 for 16-bit
//! mono (it asks only that the bits fit), any sample rate, the `data` size
//! as written (it never looks at the file's length), and refuses A-law and
//! µ-law; so the few fields are read and checked here, each check named.

use std::io::{Read, Seek, SeekFrom};

use rust_decimal::{Decimal, RoundingStrategy};

/// Decimal places of measured seconds: those of a charge.
pub const SECONDS_DP: u32 = 8;

/// `frames` at `rate` Hz in seconds, rounded half away from zero to
/// [`SECONDS_DP`] places (as charges are).
pub fn seconds_of(frames: u64, rate: u32) -> Decimal {
    (Decimal::from(frames) / Decimal::from(rate))
        .round_dp_with_strategy(SECONDS_DP, RoundingStrategy::MidpointAwayFromZero)
}

/// Most channels accepted.
pub const MAX_CHANNELS: u16 = 64;
/// Lowest sample rate accepted, in Hz.
pub const MIN_RATE: u32 = 1_000;
/// Highest sample rate accepted, in Hz: the highest of common audio
/// hardware and formats (DXD's 352.8 kHz included).
pub const MAX_RATE: u32 = 384_000;
/// Chunks read before the `data` chunk at most.
pub const MAX_CHUNKS: usize = 1024;

const PCM: u16 = 0x0001;
const FLOAT: u16 = 0x0003;
const ALAW: u16 = 0x0006;
const MULAW: u16 = 0x0007;
const EXTENSIBLE: u16 = 0xFFFE;
/// The GUID of a `WAVE_FORMAT_EXTENSIBLE` sub-format
/// (`KSDATAFORMAT_SUBTYPE_*`) is its format tag (2 bytes) and then these.
const SUBTYPE_TAIL: [u8; 14] = [
    0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71,
];

/// What a WAV holds, as far as its seconds go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WavSeconds {
    /// The seconds of its samples.
    Measured(Decimal),
    /// A compressed format: not countable from its bytes.
    Compressed,
}

/// Why a WAV is refused: what in its header disagrees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("inconsistent WAV header: {0}")]
pub struct Refused(pub String);

fn refused<T>(why: impl Into<String>) -> Result<T, Refused> {
    Err(Refused(why.into()))
}

/// The checked fields of a `fmt ` chunk of a countable format.
#[derive(Debug, Clone, Copy)]
struct Fmt {
    rate: u32,
    block_align: u16,
}

/// Seconds of the RIFF/WAVE file of `len` bytes read by `r` (its first 12
/// bytes, `RIFF....WAVE`, already judged by the caller). See the module
/// docs for what is checked.
pub fn seconds<R: Read + Seek>(r: &mut R, len: u64) -> Result<WavSeconds, Refused> {
    let mut pos = 12u64;
    let mut fmt: Option<Option<Fmt>> = None;
    for _ in 0..MAX_CHUNKS {
        let Some((id, size)) = chunk_header(r, pos) else {
            break;
        };
        match &id {
            b"fmt " => fmt = Some(read_fmt(r, size)?),
            b"data" => {
                return match fmt {
                    None => refused("the data chunk comes before any fmt chunk"),
                    Some(None) => Ok(WavSeconds::Compressed),
                    Some(Some(f)) => data_seconds(r, f, pos + 8, size, len),
                };
            }
            _ => {}
        }
        pos = pos.saturating_add(8 + u64::from(size) + u64::from(size & 1));
        if pos >= len {
            break;
        }
    }
    refused(format!(
        "no data chunk (with a fmt chunk before it) among the first {MAX_CHUNKS} chunks"
    ))
}

/// Reads and checks a `fmt ` chunk of `size` bytes (the reader at its
/// body): `None` for a compressed format.
fn read_fmt<R: Read>(r: &mut R, size: u32) -> Result<Option<Fmt>, Refused> {
    if size < 16 {
        return refused(format!("a fmt chunk of {size} bytes (at least 16)"));
    }
    let mut f = [0u8; 16];
    r.read_exact(&mut f)
        .map_err(|_| Refused("the fmt chunk is cut off".into()))?;
    let u16_at = |i: usize| u16::from_le_bytes([f[i], f[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]]);
    let (mut tag, channels, rate) = (u16_at(0), u16_at(2), u32_at(4));
    let (byte_rate, block_align, bits) = (u32_at(8), u16_at(12), u16_at(14));
    if tag == EXTENSIBLE {
        if size < 40 {
            return refused(format!(
                "an extensible fmt chunk of {size} bytes (at least 40)"
            ));
        }
        let mut x = [0u8; 24];
        r.read_exact(&mut x)
            .map_err(|_| Refused("the fmt chunk is cut off".into()))?;
        let valid_bits = u16::from_le_bytes([x[2], x[3]]);
        if valid_bits > bits {
            return refused(format!(
                "{valid_bits} valid bits in a container of {bits} bits"
            ));
        }
        if x[10..24] != SUBTYPE_TAIL {
            return Ok(None);
        }
        tag = u16::from_le_bytes([x[8], x[9]]);
    }
    let sizes: &[u16] = match tag {
        PCM => &[8, 16, 24, 32],
        FLOAT => &[32, 64],
        ALAW | MULAW => &[8],
        _ => return Ok(None),
    };
    if !(1..=MAX_CHANNELS).contains(&channels) {
        return refused(format!("{channels} channels (1 to {MAX_CHANNELS})"));
    }
    if !(MIN_RATE..=MAX_RATE).contains(&rate) {
        return refused(format!(
            "a sample rate of {rate} Hz ({MIN_RATE} to {MAX_RATE})"
        ));
    }
    if !sizes.contains(&bits) {
        return refused(format!(
            "{bits} bits per sample (format {tag:#06x} takes {sizes:?})"
        ));
    }
    let frame = u32::from(channels) * u32::from(bits / 8);
    if u32::from(block_align) != frame {
        return refused(format!(
            "block_align {block_align} is not channels ({channels}) times bytes per sample ({})",
            bits / 8
        ));
    }
    if u64::from(byte_rate) != u64::from(rate) * u64::from(block_align) {
        return refused(format!(
            "a byte rate of {byte_rate} is not sample rate ({rate}) times block_align ({block_align})"
        ));
    }
    Ok(Some(Fmt { rate, block_align }))
}

/// The seconds of a `data` chunk starting at `start` and declaring `size`
/// bytes, in a file of `len` bytes (see the module docs).
fn data_seconds<R: Read + Seek>(
    r: &mut R,
    fmt: Fmt,
    start: u64,
    size: u32,
    len: u64,
) -> Result<WavSeconds, Refused> {
    let available = len.saturating_sub(start);
    let declared = u64::from(size);
    let data = if declared < available && chain_ends_at(r, start + declared, len) {
        declared
    } else if declared == 0 || declared >= available {
        available
    } else {
        return refused(format!(
            "a data chunk of {declared} bytes followed by {} bytes that are not chunks",
            available - declared
        ));
    };
    let align = u64::from(fmt.block_align);
    if data % align != 0 {
        return refused(format!(
            "{data} bytes of samples are not whole frames of {align} bytes"
        ));
    }
    Ok(WavSeconds::Measured(seconds_of(data / align, fmt.rate)))
}

/// The id and declared size of the chunk at `pos` (the reader left at its body).
fn chunk_header<R: Read + Seek>(r: &mut R, pos: u64) -> Option<([u8; 4], u32)> {
    r.seek(SeekFrom::Start(pos)).ok()?;
    let mut h = [0u8; 8];
    r.read_exact(&mut h).ok()?;
    Some((
        [h[0], h[1], h[2], h[3]],
        u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
    ))
}

/// Whether the bytes from `pos` to `len` are whole chunks (printable ids,
/// sizes that fit), a pad byte allowed: what follows a truthful `data` size.
fn chain_ends_at<R: Read + Seek>(r: &mut R, mut pos: u64, len: u64) -> bool {
    for _ in 0..64 {
        if pos >= len || (pos + 1 == len && pos % 2 == 1) {
            return true;
        }
        if len - pos < 8 {
            return false;
        }
        let Some((id, size)) = chunk_header(r, pos) else {
            return false;
        };
        if !id.iter().all(|b| b.is_ascii_alphanumeric() || *b == b' ') {
            return false;
        }
        pos += 8 + u64::from(size) + u64::from(size & 1);
        if pos > len + 1 {
            return false;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::str::FromStr;

    /// A WAV with these `fmt ` fields and `data` (a 16-byte `fmt ` chunk;
    /// `extensible`: a 40-byte one of sub-format `tag`).
    fn wav(
        tag: u16,
        ch: u16,
        rate: u32,
        byte_rate: u32,
        align: u16,
        bits: u16,
        data: &[u8],
    ) -> Vec<u8> {
        let mut fmt = Vec::new();
        let extensible = tag == EXTENSIBLE;
        fmt.extend_from_slice(&tag.to_le_bytes());
        fmt.extend_from_slice(&ch.to_le_bytes());
        fmt.extend_from_slice(&rate.to_le_bytes());
        fmt.extend_from_slice(&byte_rate.to_le_bytes());
        fmt.extend_from_slice(&align.to_le_bytes());
        fmt.extend_from_slice(&bits.to_le_bytes());
        if extensible {
            fmt.extend_from_slice(&22u16.to_le_bytes());
            fmt.extend_from_slice(&bits.to_le_bytes());
            fmt.extend_from_slice(&0u32.to_le_bytes());
            fmt.extend_from_slice(&FLOAT.to_le_bytes());
            fmt.extend_from_slice(&SUBTYPE_TAIL);
        }
        let mut w = b"RIFF\0\0\0\0WAVEfmt ".to_vec();
        w.extend_from_slice(&(fmt.len() as u32).to_le_bytes());
        w.extend_from_slice(&fmt);
        w.extend_from_slice(b"data");
        w.extend_from_slice(&(data.len() as u32).to_le_bytes());
        w.extend_from_slice(data);
        w
    }

    fn secs(w: &[u8]) -> Result<WavSeconds, Refused> {
        seconds(&mut Cursor::new(w), w.len() as u64)
    }

    fn measured(s: &str) -> Result<WavSeconds, Refused> {
        Ok(WavSeconds::Measured(Decimal::from_str(s).unwrap()))
    }

    #[test]
    fn consistent_headers_are_counted_to_the_eighth_place() {
        // 44 101 stereo 16-bit frames at 44.1 kHz.
        let data = vec![1u8; 44_101 * 4];
        assert_eq!(
            secs(&wav(PCM, 2, 44_100, 176_400, 4, 16, &data)),
            measured("1.00002268")
        );
        // A midpoint rounds away from zero: 1 frame at 64 kHz = 0.000015625 s.
        assert_eq!(
            secs(&wav(PCM, 1, 64_000, 128_000, 2, 16, &[1, 2])),
            measured("0.00001563")
        );
        // µ-law and A-law 8 kHz; float through WAVE_FORMAT_EXTENSIBLE.
        for tag in [MULAW, ALAW] {
            assert_eq!(
                secs(&wav(tag, 1, 8_000, 8_000, 1, 8, &[0x55; 12_000])),
                measured("1.5")
            );
        }
        assert_eq!(
            secs(&wav(EXTENSIBLE, 1, 48_000, 192_000, 4, 32, &[0; 96_000])),
            measured("0.5")
        );
        // A compressed format is not judged, nor counted.
        assert_eq!(
            secs(&wav(0x0011, 1, 8_000, 4_055, 256, 4, &[0; 512])),
            Ok(WavSeconds::Compressed)
        );
    }

    #[test]
    fn inconsistent_headers_are_refused() {
        let minute = vec![1u8; 60 * 16_000 * 2];
        let refused = |w: Vec<u8>, what: &str| {
            let e = secs(&w).unwrap_err();
            assert!(e.0.contains(what), "{e} lacks {what:?}");
        };
        // (channels, rate, byte rate, block_align, bits, data bytes): what is said.
        #[rustfmt::skip]
        let cases: [(u16, u32, u32, u16, u16, usize, &str); 8] = [
            // block_align 1000 for 16-bit mono (the byte rate made to match).
            (1, 16_000, 16_000_000, 1000, 16, 1_920_000, "block_align 1000"),
            (1, 8_000_000, 16_000_000, 2, 16, 1_920_000, "sample rate of 8000000"),
            (1, 999, 1_998, 2, 16, 1_920_000, "sample rate of 999"),
            // A byte rate that is not rate × block_align.
            (1, 16_000, 1_000_000, 2, 16, 1_920_000, "byte rate of 1000000"),
            // Bits that are no sample size; no channel; too many.
            (1, 16_000, 24_000, 3, 12, 1_920_000, "12 bits"),
            (0, 16_000, 0, 0, 16, 1_920_000, "0 channels"),
            (65, 16_000, 2_080_000, 130, 16, 1_920_000, "65 channels"),
            // Data that is not whole frames.
            (1, 16_000, 32_000, 2, 16, 32_001, "not whole frames"),
        ];
        for (ch, rate, byte_rate, align, bits, n, what) in cases {
            refused(
                wav(PCM, ch, rate, byte_rate, align, bits, &minute[..n]),
                what,
            );
        }
        // A data size the bytes disagree with: smaller, and samples after.
        let mut w = wav(PCM, 1, 16_000, 32_000, 2, 16, &minute);
        w[40..44].copy_from_slice(&16_000u32.to_le_bytes());
        refused(w, "followed by");
        // No fmt chunk before the data.
        let mut w = b"RIFF\0\0\0\0WAVEdata\x04\0\0\0\0\0\0\0".to_vec();
        refused(w.clone(), "before any fmt");
        w.truncate(12);
        refused(w, "no data chunk");
    }
}
