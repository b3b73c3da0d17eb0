// `[prices]`: `<product>.<unit>` keys of a known product and unit, decimal prices.
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

[prices]
"tss.audio_seconds" = "0.0005"
"tts.audio_secs" = "0.0005"
"tts.images" = "0,5"

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
