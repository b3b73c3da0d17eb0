// A typo in a keyword names the row, the key and the accepted values.
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
mode = "prox"
capability = "voices"
billing = "free"
upstream = { base = "main", method = "GET", path = "/voices/{voice_uuid}" }
"#);

fn main() {}
