// `[limits]`: a limited mode and a size; a limited mode a row uses needs one.
codegen::routes!(inline = r#"
[areas.voice]
prefix = "/api/v1/voice"
auth = "bearer"
errors = "detail"

[resources]
voice_uuid = "voice"

[bases.main]
auth = "bearer"

[capabilities]
tts = "60/m"

[limits]
uplaod = "500 MiB"
speech = "64 MB"

[[endpoint]]
id = "tts.voice"
area = "voice"
method = "GET"
path = "/tts/voices/{voice_uuid}"
mode = "proxy"
capability = "tts"
billing = "free"
upstream = { base = "main", method = "GET", path = "/voices/{voice_uuid}" }

[[endpoint]]
id = "tts.speech"
area = "voice"
method = "POST"
path = "/tts/speech"
mode = "speech"
capability = "tts"
billing = "audio_seconds"
upstream = { base = "main", method = "POST", path = "/speech" }
"#);

fn main() {}
