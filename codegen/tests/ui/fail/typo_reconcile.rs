// `[reconcile.*]`: the product must be a row's capability or job kind,
// each key a billing unit.
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

[reconcile.tss]
audio_seconds = "synth"

[reconcile.tts]
audio_second = "synth"

[[endpoint]]
id = "tts.voice"
area = "voice"
method = "GET"
path = "/tts/voices/{voice_uuid}"
mode = "proxy"
capability = "tts"
billing = "free"
upstream = { base = "main", method = "GET", path = "/voices/{voice_uuid}" }
"#);

fn main() {}
