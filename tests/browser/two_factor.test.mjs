// Two-factor sign-in in headless Chromium against a real uplink-console: an admin sets it up
// from the QR code (read back with zbarimg) and a code computed here from the key the page
// shows, keeps a recovery code, signs out and in again with a code, then requires two-factor
// sign-in for everyone. A member without it is then held to the enrolment page, sees their
// agent refused (owner_needs_two_factor, which the agent API confirms), sets it up, and their
// agent works again. Screenshots at 1400 and 800 px go to --screenshots.
//
//   node two_factor.test.mjs --console BUILD/bin/uplink-console [--chromium /usr/bin/chromium]
//                            [--screenshots DIR] [--zbarimg /usr/bin/zbarimg]
import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import {
  Processes, adminEmail, adminPassword as password, call, expectStatus, launchChromium, newPage, runTest,
  screenshots, startConsole, testOptions, waitUntil,
} from './support.mjs';

const options = testOptions(['console'], ['zbarimg']);
const zbarimg = options.zbarimg || '/usr/bin/zbarimg';
const memberEmail = 'bob@example.com';
const dataDir = mkdtempSync(join(tmpdir(), 'uplink-browser-2fa-'));
const processes = new Processes();
let browser = null;

// RFC 6238 as an authenticator app computes it: HMAC-SHA1 of the 30-second step, 6 digits.
function totp(base32, at = Date.now()) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const c of base32.replace(/[\s=]/g, '').toUpperCase()) {
    bits += alphabet.indexOf(c).toString(2).padStart(5, '0');
  }
  const key = Buffer.from(bits.match(/.{8}/g).map((b) => parseInt(b, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(at / 1000 / 30)));
  const mac = createHmac('sha1', key).update(counter).digest();
  const offset = mac[mac.length - 1] & 15;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1000000).padStart(6, '0');
}

async function main() {
  // The RFC 6238 vector checks this test's own TOTP before it is trusted with the page's.
  assert.equal(totp('GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ', 59000), '287082');

  // The admin has a password; a member has a connection whose agent reports.
  const { apiKey, base } = await startConsole(processes, options.console, dataDir);
  await expectStatus(call(base, 'POST', '/api/v1/users', apiKey, { email: memberEmail, role: 'member', password }), 201);
  const memberSession = await expectStatus(call(base, 'POST', '/api/v1/sessions', null, { email: memberEmail, password }), 201);
  await expectStatus(call(base, 'POST', '/api/v1/session/confirm', memberSession.token, { password }), 200);
  const memberKey = (await expectStatus(call(base, 'POST', '/api/v1/api-keys', memberSession.token, { name: 'ci' }), 201)).key;
  const connection = await expectStatus(call(base, 'POST', '/api/v1/connections', memberKey,
                                             { agent_name: 'inventory', cluster_name: 'bob-gpu' }), 201);
  const report = () => call(base, 'POST', '/api/v1/agent/inventory', connection.token, {
    agent_version: '0.1.0', cluster_uid: 'kube-system-uid-bob', selector: 'nvidia.com/gpu.present=true',
    collected_at: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), nodes: [],
  });
  await expectStatus(report(), 200);

  browser = await launchChromium(options.chromium);
  const page = await newPage(browser);
  const pageErrors = page.errors;
  // Each page at both widths.
  const shots = (name) => screenshots(page, options.screenshots, name);
  const signIn = async (email) => {
    await page.goto(base + '/');
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password', { exact: true }).fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
  };
  const signOut = async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
  };
  const confirmPassword = async () => {
    await page.getByLabel('Password', { exact: true }).last().fill(password);
    await page.getByRole('button', { name: 'Confirm', exact: true }).click();
  };
  // Sets up two-factor from the page: the QR code must scan to the key the page shows.
  const enrol = async (email) => {
    await page.getByRole('button', { name: 'Set up two-factor sign-in' }).click();
    await confirmPassword();
    const secretCode = page.locator('code[data-secret]');
    await secretCode.waitFor();
    const secret = await secretCode.getAttribute('data-secret');
    assert.match(secret, /^[A-Z2-7]{32}$/);
    assert.equal((await secretCode.innerText()).replace(/\s/g, ''), secret);
    const qrPath = join(dataDir, 'qr-' + email + '.png');
    await page.locator('svg[data-qr]').screenshot({ path: qrPath });
    const scanned = execFileSync(zbarimg, ['--quiet', '--raw', qrPath], { encoding: 'utf8' }).trim();
    assert.equal(scanned, 'otpauth://totp/uplink:' + encodeURIComponent(email) + '?secret=' + secret +
                          '&issuer=uplink&algorithm=SHA1&digits=6&period=30');
    return secret;
  };

  // 1. The admin sets it up. A wrong code is refused and nothing is on yet.
  await signIn(adminEmail);
  await page.getByRole('link', { name: 'Two-factor' }).click();
  await page.locator('[data-two-factor-status="off"]').waitFor();
  const secret = await enrol(adminEmail);
  await shots('two-factor-enrol');
  const wrong = String((Number(totp(secret)) + 1) % 1000000).padStart(6, '0');
  await page.getByLabel('Code from your authenticator app').fill(wrong);
  await page.getByRole('button', { name: 'Turn on two-factor sign-in' }).click();
  await page.getByRole('alert').filter({ hasText: 'the two-factor code is wrong' }).waitFor();
  await page.getByLabel('Code from your authenticator app').fill(totp(secret));
  await page.getByRole('button', { name: 'Turn on two-factor sign-in' }).click();
  const codes = (await page.locator('pre[data-recovery-codes]').innerText()).trim().split('\n');
  assert.equal(codes.length, 10);
  assert.match(codes[0], /^[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}$/);
  await shots('two-factor-recovery-codes');
  await page.getByRole('button', { name: 'I stored the recovery codes' }).click();
  await page.locator('[data-two-factor-status="on"]').waitFor();
  assert.match(await page.locator('dl.facts').innerText(), /10 left/);
  await shots('two-factor-on');
  // The key is not shown again: nothing on the page or from the API holds it.
  assert.equal((await page.content()).includes(secret), false);
  const status = await expectStatus(call(base, 'GET', '/api/v1/two-factor', apiKey), 200);
  assert.equal(JSON.stringify(status).includes(secret), false);

  // 2. Signing in again takes the code. The one that turned it on is spent, so this uses the
  // app's next one (a step ahead is within the console's window).
  await signOut();
  await signIn(adminEmail);
  const codeField = page.getByLabel('Code from your authenticator app, or a recovery code');
  await codeField.waitFor();
  await shots('sign-in-code');
  await codeField.fill(wrong);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').filter({ hasText: 'the two-factor code is wrong' }).waitFor();
  await codeField.fill(totp(secret, Date.now() + 30000));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  // And with a recovery code, once.
  await signOut();
  await signIn(adminEmail);
  await codeField.fill(codes[0].toUpperCase());
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();

  // 3. The admin requires it for everyone, seeing whom it shuts out first.
  await page.getByRole('link', { name: 'Users' }).click();
  const setting = page.locator('section[data-require-two-factor]');
  await setting.waitFor();
  assert.equal(await setting.getAttribute('data-require-two-factor'), 'off');
  assert.match(await setting.locator('[data-without-two-factor]').innerText(),
               /1 active user\(s\) without it: bob@example\.com; 1 connection\(s\) of theirs would have their agents refused/);
  assert.equal((await page.locator('tr[data-user="bob@example.com"] td.two-factor').innerText()).trim(), 'off');
  await page.getByRole('button', { name: 'Require it' }).click();
  await confirmPassword();
  await page.locator('section[data-require-two-factor="on"]').waitFor();
  await shots('users-two-factor-required');
  const refused = await report();
  assert.equal(refused.status, 403);
  assert.equal(refused.body.error.code, 'owner_needs_two_factor');
  await signOut();

  // 4. The member signs in: held to enrolment, with their agent shown refused.
  await signIn(memberEmail);
  await page.locator('[data-enrollment-required]').waitFor();
  const navLinks = await page.locator('header nav a').allInnerTexts();
  assert.deepEqual(navLinks, ['Two-factor', 'Connections']);
  await shots('two-factor-held');
  await page.getByRole('link', { name: 'Connections' }).click();
  await page.locator('tr[data-connection="bob-gpu"] [data-refused="owner_needs_two_factor"]').waitFor();
  await shots('connections-agent-refused');
  await page.getByRole('link', { name: 'Two-factor' }).click();
  const memberSecret = await enrol(memberEmail);
  await page.getByLabel('Code from your authenticator app').fill(totp(memberSecret));
  await page.getByRole('button', { name: 'Turn on two-factor sign-in' }).click();
  await page.getByRole('button', { name: 'I stored the recovery codes' }).click();
  // Set up: the whole console is theirs again, and so is their agent.
  await page.getByRole('link', { name: 'Agent tokens' }).waitFor();
  await page.getByRole('link', { name: 'Connections' }).click();
  await page.locator('tr[data-connection="bob-gpu"]').waitFor();
  assert.equal(await page.locator('[data-refused]').count(), 0);
  await expectStatus(report(), 200);

  assert.deepEqual(pageErrors, []);
}

// A failure leaves a screenshot of the page it happened on.
async function mainWithFailureShot() {
  try {
    await main();
  } catch (error) {
    const pages = browser ? browser.contexts().flatMap((c) => c.pages()) : [];
    for (const page of pages) {
      await page.screenshot({ path: join(options.screenshots, 'two-factor-failure.png'), fullPage: true }).catch(() => {});
    }
    throw error;
  }
}

await runTest(mainWithFailureShot, { processes, browser: () => browser, dir: dataDir });
