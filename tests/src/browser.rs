//! A real browser for the app's tests: Debian's Chromium, headless, driven over WebDriver by its own
//! `chromedriver` process (started per browser on a free loopback port, killed when dropped), with helpers to
//! wait for elements and text, type, click and take screenshots.

use crate::scratch::Scratch;
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Where the tests write the app's screenshots (README shows copies from `docs/screenshots/`).
pub fn screenshot_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/app-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot directory");
    dir
}

/// A headless Chromium session.
pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: Scratch,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Browser")
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

impl Browser {
    /// Starts chromedriver and a headless Chromium `width` pixels wide.
    pub async fn start(width: u32) -> Self {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            // Its own process group, so the browser it starts ends with it whatever happens to the test.
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (Debian package chromium-driver; .ci/run installs it)");
        let profile = Scratch::new("chromium");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"binary": "/usr/bin/chromium", "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
                "--disable-features=Translate,OptimizationHints,MediaRouter",
                format!("--window-size={width},900"), format!("--user-data-dir={}", profile.display()),
            ]}),
        );
        let url = format!("http://127.0.0.1:{port}");
        let mut last_error = String::new();
        for _ in 0..100 {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector).capabilities(capabilities.clone()).connect(&url).await {
                Ok(client) => return Self { client, driver, _profile: profile },
                Err(e) => last_error = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chromedriver did not start a session: {last_error}");
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigate");
    }

    /// The first element matching `css`, waiting up to 15 s for it.
    pub async fn find(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(15))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element `{css}` within 15 s: {e}"))
    }

    /// Whether an element matches `css` now.
    pub async fn has(&self, css: &str) -> bool {
        self.client.find(Locator::Css(css)).await.is_ok()
    }

    /// Waits until `css` matches nothing.
    pub async fn gone(&self, css: &str) {
        for _ in 0..150 {
            if !self.has(css).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("`{css}` still there after 15 s");
    }

    /// Clicks the element at `css`, found again when the page re-rendered it between the find and the click (a
    /// stale element: a list that refreshed as a capture or a save arrived).
    pub async fn click(&self, css: &str) {
        for _ in 0..10 {
            match self.find(css).await.click().await {
                Ok(_) => return,
                Err(e) if e.to_string().contains("stale element") => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("click `{css}`: {e}"),
            }
        }
        panic!("click `{css}`: the element went stale ten times in a row");
    }

    /// Clears the input at `css` and types `text`.
    pub async fn type_into(&self, css: &str, text: &str) {
        let input = self.find(css).await;
        input.clear().await.expect("clear");
        input.send_keys(text).await.unwrap_or_else(|e| panic!("type into `{css}`: {e}"));
    }

    /// The text of the element at `css`.
    pub async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.expect("text")
    }

    /// Waits until the element at `css` holds `wanted` in its text; answers that text.
    pub async fn wait_text(&self, css: &str, wanted: &str) -> String {
        let mut seen = String::new();
        for _ in 0..150 {
            if let Ok(element) = self.client.find(Locator::Css(css)).await {
                seen = element.text().await.unwrap_or_default();
                if seen.contains(wanted) {
                    return seen;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("`{css}` did not show {wanted:?} within 15 s; it shows {seen:?}");
    }

    /// Waits up to 15 s for `script` (run with `args`) to answer a string; answers it.
    async fn poll_for(&self, script: &str, args: Vec<Value>, what: &str) -> String {
        for _ in 0..150 {
            if let Some(found) = self.run(script, args.clone()).await.as_str() {
                return found.to_owned();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what} within 15 s");
    }

    /// A CSS selector of the control inside `scope` whose label reads `label` (as a person finds it by its
    /// accessible name); the last one when several match (a row just added).
    pub async fn labelled(&self, scope: &str, label: &str) -> String {
        let script = "const labels = [...document.querySelectorAll(arguments[0] + ' label')]
                        .filter(l => l.textContent.trim() === arguments[1] && l.htmlFor);
                      return labels.length ? '#' + CSS.escape(labels[labels.length - 1].htmlFor) : null;";
        self.poll_for(script, vec![scope.into(), label.into()], &format!("no control labelled {label:?} in `{scope}`"))
            .await
    }

    /// Clicks the button (or link) inside `scope` whose text reads `name`.
    pub async fn click_named(&self, scope: &str, name: &str) {
        let script = "const found = [...document.querySelectorAll(arguments[0] + ' button, ' + arguments[0] + ' a, '
                        + arguments[0] + ' summary')].find(b => b.textContent.trim() === arguments[1]);
                      if (!found) return null;
                      if (!found.id) found.id = 'named-' + Math.random().toString(36).slice(2);
                      return '#' + CSS.escape(found.id);";
        let css = self
            .poll_for(script, vec![scope.into(), name.into()], &format!("nothing named {name:?} in `{scope}`"))
            .await;
        self.click(&css).await;
    }

    /// Chooses the option whose text reads `text` in the select at `css` (as a person picks it).
    pub async fn choose(&self, css: &str, text: &str) {
        let script = "const select = document.querySelector(arguments[0]);
                      const option = select && [...select.options].find(o => o.textContent.trim() === arguments[1]);
                      if (!option) return null;
                      select.value = option.value;
                      select.dispatchEvent(new Event('change', {bubbles: true}));
                      return option.value;";
        self.poll_for(script, vec![css.into(), text.into()], &format!("no option {text:?} in `{css}`")).await;
    }

    /// Runs `script` (a function body; `arguments` are `args`) and answers its value.
    pub async fn run(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.unwrap_or_else(|e| panic!("script failed: {e}"))
    }

    /// Signs in through the form with the built-in provider.
    pub async fn sign_in(&self, base: &str, email: &str, password: &str) {
        self.goto(&format!("{base}/#/signin")).await;
        self.type_into("input[name=email]", email).await;
        self.type_into("input[name=password]", password).await;
        self.click("form[aria-label='Sign in'] button[type=submit]").await;
        self.find("#sign-out").await;
    }

    /// Writes a PNG of the page to the screenshot directory.
    pub async fn screenshot(&self, name: &str) -> std::path::PathBuf {
        let png = self.client.screenshot().await.expect("screenshot");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let path = screenshot_dir().join(name);
        std::fs::write(&path, png).expect("write screenshot");
        path
    }

    /// Ends the session and the driver.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.driver.wait();
    }
}

/// The keyboard, as a person who does not use a mouse: keys pressed where the focus is, text typed there, Tab
/// until a control of a given name has the focus.
impl Browser {
    /// Presses `key` (a character or a `fantoccini::key::Key`) where the focus is, with `held` (Shift, Control)
    /// down meanwhile.
    pub async fn press_with(&self, held: &[fantoccini::key::Key], key: impl Into<char>) {
        use fantoccini::actions::{InputSource as _, KeyAction, KeyActions};
        let key = key.into();
        let mut actions = KeyActions::new("keyboard".into());
        for held in held {
            actions = actions.then(KeyAction::Down { value: (*held).into() });
        }
        actions = actions.then(KeyAction::Down { value: key }).then(KeyAction::Up { value: key });
        for held in held.iter().rev() {
            actions = actions.then(KeyAction::Up { value: (*held).into() });
        }
        self.client.perform_actions(actions).await.expect("keys pressed");
    }

    /// Presses `key` where the focus is.
    pub async fn press(&self, key: impl Into<char>) {
        self.press_with(&[], key).await;
    }

    /// Types `text` into the focused control, replacing what it held (Control+A, then the text).
    pub async fn type_here(&self, text: &str) {
        self.press_with(&[fantoccini::key::Key::Control], 'a').await;
        if text.is_empty() {
            self.press(fantoccini::key::Key::Backspace).await;
            return;
        }
        let focused = self.client.active_element().await.expect("a focused element");
        focused.send_keys(text).await.expect("typed");
    }

    /// The focused element's accessible name as the tests read it (its aria-label, its label, or its text), and
    /// whether it sits inside `scope`.
    pub async fn focused(&self, scope: &str) -> (String, bool) {
        let script = "const el = document.activeElement;
                      if (!el || el === document.body) return ['', false];
                      const name = el.getAttribute('aria-label')
                        || (el.labels && el.labels.length ? el.labels[0].textContent : el.textContent);
                      return [name.trim(), Boolean(el.closest(arguments[0]))];";
        serde_json::from_value(self.run(script, vec![scope.into()]).await).expect("name and place")
    }

    /// Presses Tab (Shift+Tab when `back`) until the focus is on a control inside `scope` named `name` (or whose
    /// name starts with `name` when it ends with a space: a capture's row, named by its method, path and time);
    /// panics after 300 presses, saying where the focus went.
    pub async fn tab_to(&self, scope: &str, name: &str, back: bool) {
        let held: &[fantoccini::key::Key] = if back { &[fantoccini::key::Key::Shift] } else { &[] };
        let mut seen = Vec::new();
        for _ in 0..300 {
            let (focused, inside) = self.focused(scope).await;
            if inside && (focused == name || (name.ends_with(' ') && focused.starts_with(name))) {
                return;
            }
            seen.push(focused);
            self.press_with(held, fantoccini::key::Key::Tab).await;
        }
        panic!("Tab never reached {name:?} in `{scope}`; the focus went through {seen:?}");
    }
}
