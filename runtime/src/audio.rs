//! Audio probing: the duration of audio the gateway holds, measured from
//! its bytes (WAV by its sample bytes, [`wav_seconds`]; MP3 and others by
//! decoding every packet with `symphonia`), never from a header's claim of
//! its length; the result is an exact decimal (frames ÷ rate).

use std::io::{Cursor, Read, Seek, SeekFrom};

use rust_decimal::Decimal;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

/// Seconds of audio in `bytes` (`ext` hints the container), to 6 places.
pub fn duration_seconds(bytes: Vec<u8>, ext: &str) -> Option<Decimal> {
    if sniff_container(&bytes) == Some("wav") {
        let len = bytes.len() as u64;
        return wav_seconds(&mut Cursor::new(bytes), len);
    }
    duration_of(Box::new(Cursor::new(bytes)), ext)
}

/// Seconds of `audio` from async code, to 6 places: a WAV by walking its
/// chunks, here (a few reads of the buffer: no copy, no hop to the blocking
/// pool, a measured cost of every synthesis at c=64); any other container
/// probed by symphonia on the blocking pool.
pub async fn measure(audio: &[u8], ext: &str) -> Option<Decimal> {
    if sniff_container(audio) == Some("wav") {
        return wav_seconds(&mut Cursor::new(audio), audio.len() as u64);
    }
    let (bytes, ext) = (audio.to_vec(), ext.to_owned());
    tokio::task::spawn_blocking(move || duration_of(Box::new(Cursor::new(bytes)), &ext))
        .await
        .ok()
        .flatten()
}

/// Seconds of audio in the file at `path`, read from disk as probed (never
/// whole in memory), to 6 places.
pub fn file_duration_seconds(path: &std::path::Path, ext: &str) -> Option<Decimal> {
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut head = [0u8; 12];
    if file.read_exact(&mut head).is_ok() && sniff_container(&head) == Some("wav") {
        return wav_seconds(&mut file, len);
    }
    file.seek(SeekFrom::Start(0)).ok()?;
    duration_of(Box::new(file), ext)
}

/// Seconds of a RIFF/WAVE file of `len` bytes, counted from the sample
/// bytes it holds. The `data` chunk's declared size is believed only when
/// it fits in the file and what follows it is a well-formed chain of chunks
/// ending at the end of the file; otherwise (a size of 0, of 16,000 for a
/// minute of audio, of `0x7fffffff` for half a second) every byte from the
/// data's start to the end of the file is audio, as a provider decoding
/// the file would find. `None`: not a WAV with a usable `fmt ` chunk.
pub fn wav_seconds<R: Read + Seek>(r: &mut R, len: u64) -> Option<Decimal> {
    let mut pos = 12u64;
    let mut fmt: Option<(u16, u32, u32, u16)> = None;
    loop {
        let (id, size) = chunk_header(r, pos)?;
        if &id == b"fmt " {
            let mut f = [0u8; 16];
            r.read_exact(&mut f).ok()?;
            let tag = u16::from_le_bytes([f[0], f[1]]);
            let rate = u32::from_le_bytes([f[4], f[5], f[6], f[7]]);
            let byte_rate = u32::from_le_bytes([f[8], f[9], f[10], f[11]]);
            let align = u16::from_le_bytes([f[12], f[13]]);
            fmt = Some((tag, rate, byte_rate, align));
        } else if &id == b"data" {
            let (tag, rate, byte_rate, align) = fmt?;
            let start = pos + 8;
            let claimed = u64::from(size);
            let data = if start + claimed <= len && chain_ends_at(r, start + claimed, len) {
                claimed
            } else {
                len.saturating_sub(start)
            };
            // PCM and float (and their extensible form): whole frames.
            return if matches!(tag, 1 | 3 | 0xFFFE) && align > 0 && rate > 0 {
                let frames = data / u64::from(align);
                Some((Decimal::from(frames) / Decimal::from(rate)).round_dp(6))
            } else if byte_rate > 0 {
                Some((Decimal::from(data) / Decimal::from(byte_rate)).round_dp(6))
            } else {
                None
            };
        }
        pos = pos.checked_add(8 + u64::from(size) + u64::from(size & 1))?;
        if pos >= len {
            return None;
        }
    }
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
        for claim in [0u32, 16_000, 0x7fff_ffff, u32::MAX] {
            let mut lying = good.clone();
            lying[40..44].copy_from_slice(&claim.to_le_bytes());
            assert_eq!(duration_seconds(lying, "wav"), Some(d("2")), "{claim}");
        }
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
