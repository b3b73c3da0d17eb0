//! Audio probing: the duration of audio the gateway holds, measured with
//! `symphonia` (WAV and MP3). Used when the upstream does not report a
//! synthesis's duration; the result is an exact decimal (frames ÷ rate).

use std::io::Cursor;

use rust_decimal::Decimal;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

/// Seconds of audio in `bytes` (`ext` hints the container), to 6 places.
pub fn duration_seconds(bytes: Vec<u8>, ext: &str) -> Option<Decimal> {
    duration_of(Box::new(Cursor::new(bytes)), ext)
}

/// Seconds of audio in the file at `path`, read from disk as probed (never
/// whole in memory), to 6 places.
pub fn file_duration_seconds(path: &std::path::Path, ext: &str) -> Option<Decimal> {
    duration_of(Box::new(std::fs::File::open(path).ok()?), ext)
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
    if let Some(frames) = track.codec_params.n_frames {
        return Some((Decimal::from(frames) / Decimal::from(rate)).round_dp(6));
    }
    // No frame count in the header (plain MP3): add up the packets.
    let mut frames: u64 = 0;
    while let Ok(packet) = probed.format.next_packet() {
        if packet.track_id() == track_id {
            frames += packet.dur;
        }
    }
    (frames > 0).then(|| (Decimal::from(frames) / Decimal::from(rate)).round_dp(6))
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
