//! Audits of the app in a real browser: axe-core's accessibility rules (the copy pinned by `console/`'s lockfile,
//! injected over WebDriver, which the page's CSP does not govern), words broken inside headers and buttons, long
//! tasks on the main thread, and controls Tab cannot reach (the keyboard itself is `Browser::press`/`tab_to`).

use crate::browser::Browser;
use serde_json::{Value, json};
use std::sync::OnceLock;

/// axe-core's script, read once from `console/node_modules` (`npm ci --prefix console`; `.ci/run` does it).
fn axe_source() -> &'static str {
    static SOURCE: OnceLock<String> = OnceLock::new();
    SOURCE.get_or_init(|| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../console/node_modules/axe-core/axe.min.js");
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run `npm ci --prefix console`)", path.display()))
    })
}

/// The serious and critical violations axe-core finds on the page as it is now, one line each (rule, impact,
/// the first offending elements).
pub async fn axe_violations(browser: &Browser) -> Vec<String> {
    if browser.run("return typeof window.axe", vec![]).await != "object" {
        browser.run(axe_source(), vec![]).await;
    }
    let script = "const done = arguments[arguments.length - 1];
        axe.run(document, {resultTypes: ['violations']}).then(r => done(r.violations
            .filter(v => v.impact === 'serious' || v.impact === 'critical')
            .map(v => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', ')}`)),
          e => done(['axe failed: ' + e]));";
    let found = browser.client.execute_async(script, vec![]).await.unwrap_or_else(|e| panic!("axe: {e}"));
    serde_json::from_value(found).expect("violations")
}

/// Words broken across lines inside a table header, a button, a tab or a navigation link, as
/// `<tag> "<text>": "<word>"` (hidden elements are skipped).
pub async fn broken_words(browser: &Browser) -> Vec<String> {
    let script = "const out = [];
        for (const el of document.querySelectorAll('th, button, [role=tab], nav a')) {
          if (!el.getClientRects().length) continue;
          const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
          for (let node; (node = walker.nextNode());) {
            for (const m of node.textContent.matchAll(/\\S+/g)) {
              const range = document.createRange();
              range.setStart(node, m.index);
              range.setEnd(node, m.index + m[0].length);
              const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
              if (tops.size > 1) out.push(`${el.tagName.toLowerCase()} \"${el.textContent.trim()}\": \"${m[0]}\"`);
            }
          }
        }
        return out;";
    serde_json::from_value(browser.run(script, vec![]).await).expect("broken words")
}

/// What is wrong with the page's stacked tables (`table.stacked`) on a narrow screen, as text: a row that is not
/// shown as a card, a word of a cell broken across lines (outside code), or a cell's code (a URL, a key) taking
/// more than 3 lines.
pub async fn stacked_card_problems(browser: &Browser) -> Vec<String> {
    let script = "const out = [];
        const lines = (node, start, end) => {
          const range = document.createRange();
          range.setStart(node, start);
          range.setEnd(node, end);
          return new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top))).size;
        };
        for (const table of document.querySelectorAll('table.stacked')) {
          if (!table.getClientRects().length) continue;
          for (const row of table.tBodies[0].rows) {
            if (getComputedStyle(row).display !== 'block') out.push(`a row shown as ${getComputedStyle(row).display}, not a card`);
            for (const cell of row.cells) {
              const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
              for (let node; (node = walker.nextNode());) {
                if (node.parentElement.closest('code')) {
                  const n = lines(node, 0, node.textContent.length);
                  if (n > 3) out.push(`code \"${node.textContent}\" over ${n} lines`);
                  continue;
                }
                for (const m of node.textContent.matchAll(/\\S+/g)) {
                  if (lines(node, m.index, m.index + m[0].length) > 1) out.push(`the word \"${m[0]}\" broken in a cell`);
                }
              }
            }
          }
        }
        return out;";
    serde_json::from_value(browser.run(script, vec![]).await).expect("stacked card problems")
}

/// Starts recording the main thread's long tasks (over 50 ms) from now on.
pub async fn record_long_tasks(browser: &Browser) {
    browser
        .run(
            "window.__longTasks = [];
             new PerformanceObserver(list => { for (const e of list.getEntries()) window.__longTasks.push(e.duration); })
               .observe({type: 'longtask'});",
            vec![],
        )
        .await;
}

/// The durations (ms) of the long tasks recorded since [`record_long_tasks`].
pub async fn long_tasks(browser: &Browser) -> Vec<f64> {
    serde_json::from_value(browser.run("return window.__longTasks", vec![]).await).expect("durations")
}

/// The visible, enabled controls of the page that Tab can never reach (`tabindex=-1`, or not focusable at all
/// although clickable), as `<tag> "<name>"`.
pub async fn unreachable_controls(browser: &Browser) -> Vec<String> {
    let script = "return [...document.querySelectorAll('a[href], button, input, select, textarea, summary, [onclick], [role=button], [role=tab]')]
        .filter(el => el.getClientRects().length && !el.disabled && !el.closest('[inert], [hidden]'))
        .filter(el => el.tabIndex < 0)
        .map(el => `${el.tagName.toLowerCase()} \"${(el.getAttribute('aria-label') || el.textContent || '').trim().slice(0, 40)}\"`);";
    serde_json::from_value(browser.run(script, vec![]).await).expect("controls")
}

/// Resizes the browser's window to `width` pixels (the page reflows as on that screen).
pub async fn resize(browser: &Browser, width: u32) {
    browser.client.set_window_size(width, 900).await.expect("resize");
    let _: Value =
        browser.run("return new Promise(r => requestAnimationFrame(() => r(true)))", vec![json!(null)]).await;
}
