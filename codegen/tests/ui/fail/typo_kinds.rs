// `[kinds.*]`: a kind no `[resources]` entry or row names (with a
// suggestion), and an unknown key of a kind.
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

[kinds.voise]
shared_stock = true

[kinds.voice]
id_feld = "voice_uuid"

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
