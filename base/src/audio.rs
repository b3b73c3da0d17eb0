//! Audio probing: the duration of audio the gateway holds, measured from
//! its bytes (a WAV from its samples, its header checked against itself
//! and the bytes: [`wav`]; MP3 by decoding every packet with `symphonia`),
//! never from a header's claim of its length; the result is an exact
//! decimal (frames ÷ rate, [`seconds_of`]).

use std::io::{Cursor, Read, Seek, SeekFrom};

use rust_decimal::Decimal;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

pub mod wav;

// Seconds from frames are defined beside the samples they count (a child
// never imports its parent here).
pub use wav::{seconds_of, SECONDS_DP};
use wav::{Refused, WavSeconds};

/// Seconds of audio in `bytes` (`ext` hints the container): `None` when
/// they cannot be measured (a refused or compressed WAV included).
pub fn duration_seconds(bytes: Vec<u8>, ext: &str) -> Option<Decimal> {
    if sniff_container(&bytes) == Some("wav") {
        let len = bytes.len() as u64;
        return measured(wav::seconds(&mut Cursor::new(bytes), len));
    }
    duration_of(Box::new(Cursor::new(bytes)), ext)
}

/// A WAV's seconds when they were measured (a refused header logged).
fn measured(w: Result<WavSeconds, Refused>) -> Option<Decimal> {
    match w {
        Ok(WavSeconds::Measured(s)) => Some(s),
        Ok(WavSeconds::Compressed) => None,
        Err(e) => {
            tracing::warn!(error = %e, "a WAV's seconds cannot be believed");
            None
        }
    }
}

/// Seconds of `audio` from async code (`None`: not measurable, a refused or
/// compressed WAV included): a WAV by walking its chunks, here (a few reads
/// of the buffer: no copy, no hop to the blocking pool, a measured cost of
/// every synthesis at c=64); any other container probed by symphonia on the
/// blocking pool.
pub async fn measure(audio: &[u8], ext: &str) -> Option<Decimal> {
    if sniff_container(audio) == Some("wav") {
        return measured(wav::seconds(&mut Cursor::new(audio), audio.len() as u64));
    }
    let (bytes, ext) = (audio.to_vec(), ext.to_owned());
    tokio::task::spawn_blocking(move || duration_of(Box::new(Cursor::new(bytes)), &ext))
        .await
        .ok()
        .flatten()
}

/// Seconds of the audio file at `path` (a WAV or an MP3, `ext` hinting
/// which), read from disk as probed (never whole in memory): `Ok(None)` for
/// a WAV of a compressed format (not countable from its bytes); `Err` with
/// what is wrong for a WAV whose header is refused ([`wav`]) or audio that
/// does not decode.
pub fn file_seconds(path: &std::path::Path, ext: &str) -> Result<Option<Decimal>, String> {
    let undecodable = || format!("not decodable {ext} audio");
    let mut file = std::fs::File::open(path).map_err(|_| undecodable())?;
    let len = file.metadata().map_err(|_| undecodable())?.len();
    let mut head = [0u8; 12];
    if file.read_exact(&mut head).is_ok() && sniff_container(&head) == Some("wav") {
        return match wav::seconds(&mut file, len) {
            Ok(WavSeconds::Measured(s)) => Ok(Some(s)),
            Ok(WavSeconds::Compressed) => Ok(None),
            Err(e) => Err(e.to_string()),
        };
    }
    file.seek(SeekFrom::Start(0)).map_err(|_| undecodable())?;
    duration_of(Box::new(file), ext)
        .map(Some)
        .ok_or_else(undecodable)
}

/// The container of audio or video `head` (the first bytes of a file)
/// starts: `wav`, `mp3`, `flac`, `ogg`, `mp4` (also m4a and mov) or `webm`
/// (also mkv); `None`: neither audio nor video.
pub fn sniff_container(head: &[u8]) -> Option<&'static str> {
    if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WAVE" {
        Some("wav")
    } else if head.starts_with(b"ID3")
        || (head.len() >= 2 && head[0] == 0xFF && head[1] & 0xE0 == 0xE0)
    {
        Some("mp3")
    } else if head.starts_with(b"fLaC") {
        Some("flac")
    } else if head.starts_with(b"OggS") {
        Some("ogg")
    } else if head.len() >= 8 && &head[4..8] == b"ftyp" {
        Some("mp4")
    } else if head.starts_with(&[0x1A, 0x45, 0xDF, 0xA3]) {
        Some("webm")
    } else {
        None
    }
}

fn duration_of(source: Box<dyn symphonia::core::io::MediaSource>, ext: &str) -> Option<Decimal> {
    let mss = MediaSourceStream::new(source, Default::default());
    let mut hint = Hint::new();
    hint.with_extension(ext);
    let mut probed = symphonia::default::get_probe()
        .format(
            &hint,
            mss,
            &FormatOptions::default(),
            &MetadataOptions::default(),
        )
        .ok()?;
    let track = probed.format.default_track()?;
    let (track_id, rate) = (track.id, track.codec_params.sample_rate?);
    // Never the header's frame count: add up the packets actually there.
    let mut frames: u64 = 0;
    while let Ok(packet) = probed.format.next_packet() {
        if packet.track_id() == track_id {
            frames += packet.dur;
        }
    }
    (frames > 0).then(|| seconds_of(frames, rate))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn wav_duration_is_exact() {
        let mut buf = Cursor::new(Vec::new());
        {
            let spec = hound::WavSpec {
                channels: 1,
                sample_rate: 16000,
                bits_per_sample: 16,
                sample_format: hound::SampleFormat::Int,
            };
            let mut w = hound::WavWriter::new(&mut buf, spec).unwrap();
            for _ in 0..24000 {
                w.write_sample(0i16).unwrap();
            }
            w.finalize().unwrap();
        }
        assert_eq!(
            duration_seconds(buf.into_inner(), "wav"),
            Some(Decimal::from_str("1.5").unwrap())
        );
    }

    #[test]
    fn a_wav_header_lying_about_its_size_is_not_believed() {
        let mut buf = Cursor::new(Vec::new());
        {
            let spec = hound::WavSpec {
                channels: 1,
                sample_rate: 16000,
                bits_per_sample: 16,
                sample_format: hound::SampleFormat::Int,
            };
            let mut w = hound::WavWriter::new(&mut buf, spec).unwrap();
            for i in 0..32000 {
                w.write_sample((i % 100) as i16 + 1).unwrap();
            }
            w.finalize().unwrap();
        }
        let good = buf.into_inner();
        let d = |s: &str| Decimal::from_str(s).unwrap();
        assert_eq!(duration_seconds(good.clone(), "wav"), Some(d("2")));
        // Unknown (0), or to or past the end: every byte to the end.
        for claim in [0u32, 0x7fff_ffff, u32::MAX] {
            let mut lying = good.clone();
            lying[40..44].copy_from_slice(&claim.to_le_bytes());
            assert_eq!(duration_seconds(lying, "wav"), Some(d("2")), "{claim}");
        }
        // Less than the file holds, samples (not chunks) after: refused.
        let mut lying = good.clone();
        lying[40..44].copy_from_slice(&16_000u32.to_le_bytes());
        assert_eq!(duration_seconds(lying, "wav"), None);
        // Half a second claiming 2 GB: half a second.
        let mut short = good[..44 + 16000].to_vec();
        short[40..44].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
        assert_eq!(duration_seconds(short, "wav"), Some(d("0.5")));
        // A truthful size followed by a LIST chunk: the size is believed.
        let mut listed = good.clone();
        listed.extend_from_slice(b"LIST\x04\0\0\0INFO");
        assert_eq!(duration_seconds(listed, "wav"), Some(d("2")));
    }

    #[test]
    fn containers_are_sniffed() {
        assert_eq!(sniff_container(b"RIFF\0\0\0\0WAVEfmt "), Some("wav"));
        assert_eq!(sniff_container(b"ID3\x04"), Some("mp3"));
        assert_eq!(sniff_container(b"\0\0\0\x20ftypisom"), Some("mp4"));
        assert_eq!(sniff_container(b"not audio at all"), None);
        assert_eq!(sniff_container(b"%PDF-1.7"), None);
    }

    #[test]
    fn garbage_has_no_duration() {
        assert_eq!(duration_seconds(b"not audio at all".to_vec(), "mp3"), None);
    }
}
