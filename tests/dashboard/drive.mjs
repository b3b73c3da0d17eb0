// Drives headless Chromium (Debian's, through playwright-core) through the
// dashboard for tests/it/dashboard.rs, and prints what it saw as one JSON
// line. Input (environment): DASHBOARD_URL, DASHBOARD_USER,
// DASHBOARD_PASSWORD, DASHBOARD_OUT (where the screenshots go),
// CHROMIUM (the browser), DASHBOARD_BUY (optional: an amount bought with
// "Buy credit" last; the checkout page the browser is sent to is answered
// here, so that nothing leaves the machine). Every console error, page error, failed request
// and answer >= 400 is collected in `problems`: the Rust test fails on any.
import { chromium } from "playwright-core";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const url = env("DASHBOARD_URL");
const out = env("DASHBOARD_OUT");
const problems = [];
const seen = {};

const browser = await chromium.launch({
  executablePath: env("CHROMIUM"),
  args: ["--no-sandbox", "--disable-gpu"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on("response", (r) => {
    if (r.status() >= 400) problems.push(`answer ${r.status()}: ${r.request().method()} ${r.url()}`);
  });
  page.setDefaultTimeout(15000);

  await page.goto(url);
  await page.waitForSelector("body[data-ready]");
  // The focus order from the top of the page: the sign-in form's fields.
  seen.tab_order = [];
  for (let i = 0; i < 3; i++) {
    await page.keyboard.press("Tab");
    seen.tab_order.push(await page.evaluate(() =>
      document.activeElement.id || document.activeElement.textContent.trim()));
  }
  // Sign in with the keyboard: labels find the fields, Enter submits.
  await page.getByLabel("Username or e-mail").fill(env("DASHBOARD_USER"));
  await page.getByLabel("Password").fill(env("DASHBOARD_PASSWORD"));
  await page.getByLabel("Password").press("Enter");
  await page.waitForSelector("#app:not([hidden])");
  await page.waitForSelector("body[data-loaded]");
  const text = (sel) => page.locator(sel).first().textContent();
  seen.who = await text("#who");
  seen.balance = await text("#balance-total");
  seen.held = await text("#balance-held");
  seen.available = await text("#balance-available");
  seen.balance_note = await text("#balance-note");
  seen.buy_visible = await page.locator("#buy").isVisible();
  seen.bars = await page.locator("#chart rect.bar").evaluateAll((rs) =>
    rs.map((r) => ({ day: r.dataset.day, cost: r.dataset.cost })));
  seen.unavailable = await page.locator(".unavailable").allTextContents();
  seen.by_model = await page.locator("#by-model tbody tr").allInnerTexts();
  seen.by_key = await page.locator("#by-key tbody tr").allInnerTexts();
  seen.batches = await page.locator("#batches tbody tr").allInnerTexts();
  // The session: a cookie no script reads; a reload keeps it signed in.
  const cookie = (await page.context().cookies()).find((c) => c.name === "gateway_session");
  seen.cookie = cookie ? { httpOnly: cookie.httpOnly, secure: cookie.secure, sameSite: cookie.sameSite } : null;
  seen.script_sees_cookie = await page.evaluate(() => document.cookie.includes("gateway_session"));
  await page.reload();
  await page.waitForSelector("body[data-ready]");
  seen.signed_in_after_reload = await page.locator("#app").isVisible();
  await page.waitForSelector("body[data-loaded]");
  // Spend alerts set on the page; an organization created.
  await page.getByLabel("Budget thresholds (% of each key's budget, comma-separated)").fill("50, 100");
  await page.getByLabel("E-mail me").check();
  await page.getByRole("button", { name: "Save alerts" }).click();
  await page.waitForFunction(() => document.querySelector("#alerts .body")?.innerText.includes("No alerts sent yet"));
  seen.alert_thresholds = await page.getByLabel("Budget thresholds (% of each key's budget, comma-separated)").inputValue();
  await page.getByLabel("New organization's name").fill("Dashboard Org");
  await page.getByRole("button", { name: "Create organization" }).click();
  await page.waitForFunction(() => document.querySelector("#orgs tbody")?.innerText.includes("Dashboard Org"));
  seen.orgs = await page.locator("#orgs tbody tr").allInnerTexts();
  seen.focused_after_sign_in = await page.evaluate(() => document.activeElement?.id);

  // A key: created (its secret shown once), then revoked.
  await page.getByLabel("Name", { exact: true }).fill("dashboard key");
  if (await page.getByLabel("Budget (USD, optional)").isVisible()) {
    await page.getByLabel("Budget (USD, optional)").fill("5");
    await page.getByLabel("Budget period").selectOption("day");
  }
  await page.getByRole("button", { name: "Create key" }).click();
  await page.waitForSelector("#new-key:not([hidden])");
  seen.new_key = await text("#new-key-value");
  await page.waitForSelector('button[aria-label="Revoke key dashboard key"]');
  seen.keys_before = await page.locator("#keys tbody tr").allInnerTexts();
  await page.screenshot({ path: `${out}/dashboard-desktop.png`, fullPage: true });
  // Its budget changed: the budget fields above the list, "Set budget".
  const setBudget = page.getByRole("button", { name: /^Set key dashboard key's budget/ });
  if (await setBudget.count()) {
    await page.getByLabel("Budget (USD, optional)").fill("7");
    await page.getByLabel("Budget period").selectOption("month");
    await setBudget.click();
    await page.waitForFunction(() => document.querySelector("#keys tbody")?.innerText.includes("$7 per month"));
    seen.keys_budget_set = await page.locator("#keys tbody tr").allInnerTexts();
  }
  // Its limits: requests and tokens per minute, "Set limits".
  await page.getByLabel("Requests per minute (optional)").fill("60");
  await page.getByLabel("Tokens per minute (optional)").fill("100000");
  await page.getByRole("button", { name: /^Set key dashboard key's limits/ }).click();
  await page.waitForFunction(() => document.querySelector("#keys tbody")?.innerText.includes("60 requests, 100000 tokens per minute"));
  seen.keys_limits_set = await page.locator("#keys tbody tr").allInnerTexts();
  // Revoked with the keyboard: focus the button, press Enter.
  await page.getByRole("button", { name: "Revoke key dashboard key" }).focus();
  await page.keyboard.press("Enter");
  await page.waitForSelector('button[aria-label="Revoke key dashboard key"]', { state: "detached" });
  seen.keys_after = await page.locator("#keys tbody tr").allInnerTexts();

  // A request's cost, in its details panel (when the ledger lists requests).
  const first = page.locator("#requests button[data-request]").first();
  if (await first.count()) {
    seen.requests = await page.locator("#requests tbody tr").allInnerTexts();
    await first.click();
    await page.waitForSelector("#generation-fields dd");
    seen.generation = Object.fromEntries(await page.locator("#generation-fields dd").evaluateAll((ds) =>
      ds.map((d) => [d.dataset.field, d.textContent])));
  }

  await page.setViewportSize({ width: 390, height: 844 });
  seen.phone_overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await page.screenshot({ path: `${out}/dashboard-phone.png`, fullPage: true });

  // Buying credit: the checkout's URL comes from the payment API through
  // the gateway; the browser goes there.
  const buy = process.env.DASHBOARD_BUY;
  if (buy && await page.locator("#buy").isVisible()) {
    await page.route("**/c/pay/**", (r) =>
      r.fulfill({ status: 200, contentType: "text/html", body: "<p>checkout</p>" }));
    await page.getByLabel("Amount (USD, at least 10.00)").fill(buy);
    await page.getByRole("button", { name: "Buy credit" }).click();
    await page.waitForURL("**/c/pay/**");
    seen.checkout_url = page.url();
  }
} catch (e) {
  problems.push(`driver: ${e.message}`);
} finally {
  await browser.close();
}
console.log(JSON.stringify({ seen, problems }));
