// `[products]`: a billing unit's own price-key product.
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

[products]
voice_subscriptions = "tts"
free = "voices"

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
