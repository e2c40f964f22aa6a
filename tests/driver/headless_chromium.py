"""Headless Chromium through Selenium for the driver's page tests (status_page_test.py,
timeline_page_test.py): Debian's chromium, chromium-driver and python3-selenium."""
import os
import shutil

SKIP = 77


class Unavailable(Exception):
    """What is missing to run a browser; the test skips (exit SKIP) with it."""


def open_browser(work):
    """A headless Chromium with its profile in `work`, logging the console (get_log)."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        raise Unavailable('python3-selenium is not installed (scripts/setup installs it)') from e
    chromium = shutil.which('chromium') or shutil.which('chromium-browser')
    chromedriver = shutil.which('chromedriver') or (
        '/usr/bin/chromedriver' if os.access('/usr/bin/chromedriver', os.X_OK) else None)
    if not chromium or not chromedriver:
        raise Unavailable('chromium and chromium-driver are needed (scripts/setup installs them)')
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
                 '--no-first-run', '--disable-extensions',
                 f'--user-data-dir={os.path.join(work, "chromium")}'):
        options.add_argument(flag)
    options.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
    browser = webdriver.Chrome(service=Service(chromedriver), options=options)
    browser.set_page_load_timeout(20)
    browser.set_script_timeout(10)
    return browser
