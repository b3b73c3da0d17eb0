// `example`: a body of the row's rules (declared fields, their types,
// required ones present), and only on a row with `[endpoint.body]`.
codegen::routes!(inline = r#"
[areas.voice]
prefix = "/api/v1/voice"
auth = "bearer"
errors = "detail"

[bases.main]
auth = "bearer"

[capabilities]
tts = "60/m"

[[endpoint]]
id = "tts.synthesize"
area = "voice"
method = "POST"
path = "/tts/synthesize"
mode = "proxy"
capability = "tts"
billing = "free"
upstream = { base = "main", method = "POST", path = "/synthesize" }
example = { txet = "Hello", sample_rate = "fast" }
[endpoint.body]
text = { type = "string", required = true }
sample_rate = { type = "integer" }

[[endpoint]]
id = "tts.voices"
area = "voice"
method = "GET"
path = "/tts/voices"
mode = "proxy"
capability = "tts"
billing = "free"
upstream = { base = "main", method = "GET", path = "/voices" }
example = { page = 1 }
"#);

fn main() {}
