// A gate on a free route is allowed (spec A2: DELETE /voices is free and
// gated to the business plan). This fixture once held the opposite rule.
mod routes {
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
id = "voices.delete"
area = "voice"
method = "DELETE"
path = "/voices/{voice_uuid}"
mode = "proxy"
capability = "voices"
billing = "free"
gate = "business_plan"
upstream = { base = "main", method = "DELETE", path = "/voices/{voice_uuid}" }
"#);
}

use runtime::spec::{Billing, Gate};

fn main() {
    assert_eq!(routes::VOICES_DELETE.billing, Billing::Free);
    assert_eq!(routes::VOICES_DELETE.gate, Some(Gate::BusinessPlan));
}
