//! The seconds of a live transcription's audio, measured from its bytes as
//! they arrive: raw audio at the rate its query names (`encoding`,
//! `sample_rate`, `channels`), or a WAV stream at the rate its header
//! names (the header's bytes are not audio). Nothing is taken from what
//! the provider claims.

use rust_decimal::Decimal;

/// Largest WAV header read before its `data` chunk.
const MAX_HEADER: usize = 4096;

/// How the caller's audio is framed.
pub(super) struct Meter {
    /// Bytes of audio a second (0 while a WAV header is still arriving).
    byte_rate: u64,
    /// Bytes a sample frame (a cut is made on a frame's boundary).
    frame: u64,
    /// A WAV header read so far (`None`: raw audio, or the header is done).
    header: Option<Vec<u8>>,
    /// Bytes of audio received.
    pub audio: u64,
}

impl Meter {
    /// From the query: raw audio (`encoding` with `sample_rate`, optional
    /// `channels`), or, without `encoding`, a WAV stream. Else the 400's
    /// message.
    pub fn of(query: &[(String, String)]) -> Result<Meter, String> {
        let get = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let Some(encoding) = get("encoding") else {
            return Ok(Meter {
                byte_rate: 0,
                frame: 1,
                header: Some(Vec::new()),
                audio: 0,
            });
        };
        let width = match encoding {
            "linear16" => 2,
            "linear32" => 4,
            "mulaw" | "alaw" => 1,
            other => {
                return Err(format!(
                    "encoding: {other:?} is not measured here (linear16, linear32, mulaw or alaw; or none, for a WAV stream)"
                ))
            }
        };
        let number = |k: &str, default: Option<u64>| match get(k) {
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0 && *n <= 384_000)
                .ok_or_else(|| format!("{k}: {v:?} is not a positive whole number")),
            None => default.ok_or_else(|| format!("{k}: required with encoding")),
        };
        let rate = number("sample_rate", None)?;
        let channels = number("channels", Some(1))?;
        Ok(Meter {
            byte_rate: width * rate * channels,
            frame: width * channels,
            header: None,
            audio: 0,
        })
    }

    /// Takes the header's bytes off the front of `chunk` while a WAV
    /// header is arriving: the count of them (the rest is audio), or why
    /// the stream is not a WAV this can measure.
    pub fn header(&mut self, chunk: &[u8]) -> Result<usize, String> {
        let Some(h) = self.header.as_mut() else {
            return Ok(0);
        };
        let before = h.len();
        h.extend_from_slice(&chunk[..chunk.len().min(MAX_HEADER + 8 - before.min(MAX_HEADER))]);
        match wav_header(h)? {
            Some((byte_rate, frame, data_at)) => {
                self.byte_rate = byte_rate;
                self.frame = frame.max(1);
                self.header = None;
                Ok(data_at - before)
            }
            None if h.len() >= MAX_HEADER => {
                Err("the audio is not a WAV stream with its data within 4 KiB; name its `encoding` and `sample_rate` for raw audio".into())
            }
            None => Ok(chunk.len()),
        }
    }

    /// Bytes of audio that fit before `seconds` of audio in all, on a
    /// sample frame's boundary.
    pub fn room(&self, seconds: u64) -> u64 {
        let end = seconds * self.byte_rate;
        let room = end.saturating_sub(self.audio);
        room - room % self.frame
    }

    /// Seconds of `bytes` of audio.
    pub fn seconds(&self, bytes: u64) -> Decimal {
        if self.byte_rate == 0 {
            return Decimal::ZERO;
        }
        Decimal::from(bytes) / Decimal::from(self.byte_rate)
    }
}

/// A WAV header's byte rate, frame size and where its data begins, once
/// they have arrived (`None`: not yet); not a WAV: the message.
fn wav_header(h: &[u8]) -> Result<Option<(u64, u64, usize)>, String> {
    if h.len() < 12 {
        return Ok(None);
    }
    if &h[..4] != b"RIFF" || &h[8..12] != b"WAVE" {
        return Err("the audio is neither raw (no `encoding` was named) nor a WAV stream".into());
    }
    let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]) as u64;
    let (mut at, mut rate) = (12, None);
    while at + 8 <= h.len() {
        let size = u32_at(at + 4) as usize;
        match &h[at..at + 4] {
            b"fmt " if at + 8 + 16 <= h.len() => {
                let align = u16::from_le_bytes([h[at + 20], h[at + 21]]) as u64;
                rate = Some((u32_at(at + 16), align));
            }
            b"fmt " => return Ok(None),
            b"data" => {
                return match rate {
                    Some((r, align)) if r > 0 => Ok(Some((r, align, at + 8))),
                    _ => Err("the WAV stream has no usable `fmt ` chunk before its data".into()),
                }
            }
            _ => {}
        }
        at += 8 + size + size % 2;
    }
    Ok(None)
}
