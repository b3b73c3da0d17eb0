// `translate`: only on a `transcription` row, and a boolean.
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

[[endpoint]]
id = "tts.voice"
area = "voice"
method = "GET"
path = "/tts/voices/{voice_uuid}"
mode = "proxy"
capability = "tts"
billing = "free"
upstream = { base = "main", method = "GET", path = "/voices/{voice_uuid}" }
translate = true

[[endpoint]]
id = "tts.other"
area = "voice"
method = "GET"
path = "/tts/other"
mode = "proxy"
capability = "tts"
billing = "free"
upstream = { base = "main", method = "GET", path = "/other" }
translate = "yes"
"#);

fn main() {}
