// `[job_ceilings]`: a billed job kind needs its ceiling, a whole number of
// units, and only a billed job kind has one.
codegen::routes!(inline = r#"
[areas.voice]
prefix = "/api/v1/voice"
auth = "bearer"
errors = "detail"

[bases.main]
auth = "bearer"

[capabilities]
stt = "30/m"
enhance = "30/m"

[job_ceilings]
stt = "3600"
stt_get = 60

[[endpoint]]
id = "stt.submit"
area = "voice"
method = "POST"
path = "/stt"
mode = "job_submit"
job = "stt"
capability = "stt"
billing = "audio_seconds"
upstream = { base = "main", method = "POST", path = "/speech-to-text" }

[[endpoint]]
id = "enhance.submit"
area = "voice"
method = "POST"
path = "/enhance"
mode = "job_submit"
job = "enhance"
capability = "enhance"
billing = "audio_seconds"
upstream = { base = "main", method = "POST", path = "/audio_enhancements" }
"#);

fn main() {}
