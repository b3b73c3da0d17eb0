// `[purposes.*]`: known keys, a prefix ending in `/`, exactly one default.
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
upload = "500 MiB"

[purposes.voice_clone]
prefix = "voice-recordings"
class = "voice_recordings"

[purposes.uploads]
prefix = "uploads/"
class = "uploads"
retention_day = 30

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
id = "uploads.create"
area = "voice"
method = "POST"
path = "/uploads"
mode = "upload"
capability = "tts"
billing = "free"
"#);

fn main() {}
