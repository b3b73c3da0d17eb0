//! Real audio for synthesis results and result media, and duration probing of
//! uploaded audio.
//!
//! * WAV: mono PCM (16, 24 or 32 bit) written with `hound`, a sine tone whose
//!   period is exactly 50 samples (so one precomputed period is repeated).
//! * MP3: silent MPEG audio Layer III frames (header, zeroed side info, zeroed
//!   main data: decoders play silence). MPEG-1 at 32/44.1/48 kHz (128 kbps,
//!   1152 samples per frame), MPEG-2 at 16/22.05/24 kHz (64 kbps) and MPEG-2.5
//!   at 8/11.025/12 kHz (32 kbps), both 576 samples per frame; the requested
//!   sample rate is mapped to the nearest of these.

use std::io::Cursor;

/// Length in milliseconds of synthesized speech for `chars` input characters:
/// `max(500, chars × seconds_per_char × 1000)`, rounded.
pub fn synth_duration_ms(chars: usize, seconds_per_char: f64) -> u64 {
    let ms = (chars as f64 * seconds_per_char * 1000.0).round();
    if ms.is_finite() && ms > 500.0 {
        ms as u64
    } else {
        500
    }
}

/// Rounds seconds to milliseconds.
pub fn round_ms(secs: f64) -> f64 {
    (secs * 1000.0).round() / 1000.0
}

/// A mono WAV tone of `duration_ms` at `sample_rate` with `bits` per sample
/// (16, 24 or 32; anything else is treated as 16).
pub fn wav_tone(duration_ms: u64, sample_rate: u32, bits: u16) -> Vec<u8> {
    let bits = if matches!(bits, 24 | 32) { bits } else { 16 };
    let samples = (duration_ms * u64::from(sample_rate) + 500) / 1000;
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate,
        bits_per_sample: bits,
        sample_format: hound::SampleFormat::Int,
    };
    let mut buf = Vec::with_capacity(64 + samples as usize * usize::from(bits / 8));
    {
        let mut writer =
            hound::WavWriter::new(Cursor::new(&mut buf), spec).expect("in-memory WAV writer");
        let max = ((1i64 << (bits - 1)) - 1) as f64;
        let period: Vec<i32> = (0..50)
            .map(|i| ((i as f64 / 50.0 * std::f64::consts::TAU).sin() * 0.2 * max) as i32)
            .collect();
        if bits == 16 {
            let mut w = writer.get_i16_writer(samples as u32);
            for i in 0..samples as usize {
                w.write_sample(period[i % 50] as i16);
            }
            w.flush().expect("in-memory WAV write");
        } else {
            for i in 0..samples as usize {
                writer
                    .write_sample(period[i % 50])
                    .expect("in-memory WAV write");
            }
        }
        writer.finalize().expect("in-memory WAV finalize");
    }
    buf
}

/// Mono 32-bit float samples of the same tone as [`wav_tone`]: a WAV file
/// (IEEE float format) when `container`, else the raw little-endian samples.
pub fn float_tone(duration_ms: u64, sample_rate: u32, container: bool) -> Vec<u8> {
    let samples = (duration_ms * u64::from(sample_rate) + 500) / 1000;
    let sample = |i: u64| ((i % 50) as f32 / 50.0 * std::f32::consts::TAU).sin() * 0.2;
    if !container {
        return (0..samples).flat_map(|i| sample(i).to_le_bytes()).collect();
    }
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut buf = Vec::with_capacity(80 + samples as usize * 4);
    {
        let mut writer =
            hound::WavWriter::new(Cursor::new(&mut buf), spec).expect("in-memory WAV writer");
        for i in 0..samples {
            writer.write_sample(sample(i)).expect("in-memory WAV write");
        }
        writer.finalize().expect("in-memory WAV finalize");
    }
    buf
}

/// Exact duration of a WAV file, when `hound` can read it.
pub fn wav_duration(data: &[u8]) -> Option<f64> {
    let reader = hound::WavReader::new(Cursor::new(data)).ok()?;
    let rate = reader.spec().sample_rate;
    (rate > 0).then(|| f64::from(reader.duration()) / f64::from(rate))
}

/// MPEG layout for one supported sample rate.
struct Mp3Layout {
    /// Sample rate in Hz.
    sample_rate: u32,
    /// Version bits: 3 = MPEG-1, 2 = MPEG-2, 0 = MPEG-2.5.
    version: u8,
    /// Sample-rate index in the frame header.
    rate_index: u8,
    /// Bitrate index in the frame header.
    bitrate_index: u8,
    /// Bits per second.
    bitrate: u32,
}

const MP3_LAYOUTS: [Mp3Layout; 9] = [
    Mp3Layout {
        sample_rate: 44100,
        version: 3,
        rate_index: 0,
        bitrate_index: 9,
        bitrate: 128_000,
    },
    Mp3Layout {
        sample_rate: 48000,
        version: 3,
        rate_index: 1,
        bitrate_index: 9,
        bitrate: 128_000,
    },
    Mp3Layout {
        sample_rate: 32000,
        version: 3,
        rate_index: 2,
        bitrate_index: 9,
        bitrate: 128_000,
    },
    Mp3Layout {
        sample_rate: 22050,
        version: 2,
        rate_index: 0,
        bitrate_index: 8,
        bitrate: 64_000,
    },
    Mp3Layout {
        sample_rate: 24000,
        version: 2,
        rate_index: 1,
        bitrate_index: 8,
        bitrate: 64_000,
    },
    Mp3Layout {
        sample_rate: 16000,
        version: 2,
        rate_index: 2,
        bitrate_index: 8,
        bitrate: 64_000,
    },
    Mp3Layout {
        sample_rate: 11025,
        version: 0,
        rate_index: 0,
        bitrate_index: 4,
        bitrate: 32_000,
    },
    Mp3Layout {
        sample_rate: 12000,
        version: 0,
        rate_index: 1,
        bitrate_index: 4,
        bitrate: 32_000,
    },
    Mp3Layout {
        sample_rate: 8000,
        version: 0,
        rate_index: 2,
        bitrate_index: 4,
        bitrate: 32_000,
    },
];

/// The MP3 sample rate used for a requested rate (nearest supported one).
pub fn mp3_sample_rate(requested: u32) -> u32 {
    mp3_layout(requested).sample_rate
}

fn mp3_layout(requested: u32) -> &'static Mp3Layout {
    MP3_LAYOUTS
        .iter()
        .min_by_key(|l| l.sample_rate.abs_diff(requested))
        .expect("non-empty table")
}

/// Silent MP3 of about `duration_ms` at (nearly) `sample_rate`.
/// Returns the bytes, the exact duration in seconds and the sample rate used.
pub fn mp3_silence(duration_ms: u64, sample_rate: u32) -> (Vec<u8>, f64, u32) {
    let l = mp3_layout(sample_rate);
    let mpeg1 = l.version == 3;
    let spf: u64 = if mpeg1 { 1152 } else { 576 };
    let frame_len = if mpeg1 {
        144 * l.bitrate / l.sample_rate
    } else {
        72 * l.bitrate / l.sample_rate
    } as usize;
    let frames =
        ((duration_ms * u64::from(l.sample_rate) + spf * 500) / (spf * 1000)).max(1) as usize;
    let header = [
        0xFF,
        0xE0 | (l.version << 3) | (0b01 << 1) | 1, // sync, version, Layer III, no CRC
        (l.bitrate_index << 4) | (l.rate_index << 2), // no padding, private 0
        0xC0,                                      // mono, no emphasis
    ];
    let mut out = vec![0u8; frames * frame_len];
    for frame in out.chunks_exact_mut(frame_len) {
        frame[..4].copy_from_slice(&header);
    }
    let secs = frames as f64 * spf as f64 / f64::from(l.sample_rate);
    (out, secs, l.sample_rate)
}

/// Counts MPEG audio Layer III frames (after an optional ID3v2 tag); returns
/// `(frames, seconds)` when at least one frame parses.
pub fn mp3_frames(data: &[u8]) -> Option<(usize, f64)> {
    const BR_V1: [u32; 15] = [
        0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320,
    ];
    const BR_V2: [u32; 15] = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
    let mut i = 0usize;
    if data.len() >= 10 && &data[..3] == b"ID3" {
        let size = data[6..10]
            .iter()
            .fold(0usize, |acc, b| (acc << 7) | usize::from(b & 0x7F));
        i = 10 + size + if data[5] & 0x10 != 0 { 10 } else { 0 };
    }
    let (mut frames, mut secs) = (0usize, 0f64);
    while i + 4 <= data.len() {
        let h = &data[i..i + 4];
        let version = (h[1] >> 3) & 3;
        let (bri, sri, pad) = (
            usize::from(h[2] >> 4),
            usize::from((h[2] >> 2) & 3),
            usize::from((h[2] >> 1) & 1),
        );
        let valid = h[0] == 0xFF
            && h[1] & 0xE0 == 0xE0
            && version != 1
            && (h[1] >> 1) & 3 == 1
            && bri != 0
            && bri != 15
            && sri != 3;
        if !valid {
            if frames == 0 {
                i += 1;
                continue;
            }
            break;
        }
        let (rate, bitrate, coef, spf) = match version {
            3 => ([44100, 48000, 32000][sri], BR_V1[bri] * 1000, 144, 1152),
            2 => ([22050, 24000, 16000][sri], BR_V2[bri] * 1000, 72, 576),
            _ => ([11025, 12000, 8000][sri], BR_V2[bri] * 1000, 72, 576),
        };
        let len = (coef * bitrate / rate) as usize + pad;
        if i + len > data.len() {
            break;
        }
        frames += 1;
        secs += f64::from(spf) / f64::from(rate);
        i += len;
    }
    (frames > 0).then_some((frames, secs))
}

/// Best-effort duration of uploaded media in seconds (ms precision): exact for
/// WAV and MP3, otherwise estimated from the size at 128 kbps (at least 1 ms).
pub fn probe_duration(data: &[u8]) -> f64 {
    if data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WAVE" {
        if let Some(d) = wav_duration(data) {
            return round_ms(d);
        }
    }
    if let Some((_, secs)) = mp3_frames(data) {
        return round_ms(secs);
    }
    size_estimate(data.len() as u64)
}

/// Duration estimate for `len` bytes of 128 kbps audio (at least 1 ms).
pub fn size_estimate(len: u64) -> f64 {
    round_ms(len as f64 / 16_000.0).max(0.001)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_rule() {
        assert_eq!(synth_duration_ms(1, 0.06), 500);
        assert_eq!(synth_duration_ms(100, 0.06), 6000);
        assert_eq!(synth_duration_ms(11, 0.06), 660);
    }

    #[test]
    fn wav_parses_to_duration() {
        for (ms, rate, bits) in [
            (660u64, 22050u32, 16u16),
            (1234, 44100, 24),
            (500, 8000, 32),
        ] {
            let wav = wav_tone(ms, rate, bits);
            let reader = hound::WavReader::new(Cursor::new(&wav)).unwrap();
            assert_eq!(reader.spec().sample_rate, rate);
            assert_eq!(reader.spec().bits_per_sample, bits);
            assert_eq!(reader.spec().channels, 1);
            let secs = f64::from(reader.duration()) / f64::from(rate);
            assert!((secs - ms as f64 / 1000.0).abs() < 0.001, "{secs} vs {ms}");
            assert_eq!(probe_duration(&wav), ms as f64 / 1000.0);
        }
    }

    #[test]
    fn mp3_frames_match_duration() {
        for (ms, rate) in [
            (6000u64, 44100u32),
            (500, 22050),
            (1000, 48000),
            (2000, 8000),
        ] {
            let (bytes, secs, used) = mp3_silence(ms, rate);
            assert_eq!(used, rate);
            let (frames, parsed) = mp3_frames(&bytes).unwrap();
            let spf = if rate >= 32000 { 1152.0 } else { 576.0 };
            assert_eq!(
                frames,
                (ms as f64 / 1000.0 * f64::from(rate) / spf).round() as usize
            );
            assert!((parsed - secs).abs() < 1e-9);
            assert!((secs - ms as f64 / 1000.0).abs() <= spf / f64::from(rate) / 2.0 + 1e-9);
        }
        assert_eq!(mp3_sample_rate(23000), 22050);
    }

    #[test]
    fn float_tone_parses() {
        let wav = float_tone(750, 44100, true);
        let reader = hound::WavReader::new(Cursor::new(&wav)).unwrap();
        assert_eq!(reader.spec().sample_format, hound::SampleFormat::Float);
        assert_eq!(probe_duration(&wav), 0.75);
        assert_eq!(float_tone(750, 44100, false).len(), 33075 * 4);
    }

    #[test]
    fn probe_fallback() {
        assert_eq!(probe_duration(&[1u8; 32_000]), 2.0);
        assert_eq!(probe_duration(b"x"), 0.001);
    }
}
