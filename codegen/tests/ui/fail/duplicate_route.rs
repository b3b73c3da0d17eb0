// Two rows serve the same method and path (parameter names and a trailing
// slash do not make them different).
codegen::routes!(inline = r#"
[areas.voice]
prefix = "/api/v1/voice"
auth = "bearer"
errors = "detail"

[bases.main]
auth = "bearer"

[capabilities]
voices = "10/m"

[[endpoint]]
id = "voices.get"
area = "voice"
method = "GET"
path = "/voices/{voice_uuid}"
mode = "proxy"
capability = "voices"
billing = "free"
upstream = { base = "main", method = "GET", path = "/voices/{voice_uuid}" }

[[endpoint]]
id = "voices.show"
area = "voice"
method = "GET"
path = "/voices/{id}/"
mode = "proxy"
capability = "voices"
billing = "free"
upstream = { base = "main", method = "GET", path = "/voices/{id}" }
"#);

fn main() {}
