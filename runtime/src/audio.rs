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
    let mss = MediaSourceStream::new(Box::new(Cursor::new(bytes)), Default::default());
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
    fn garbage_has_no_duration() {
        assert_eq!(duration_seconds(b"not audio at all".to_vec(), "mp3"), None);
    }
}
