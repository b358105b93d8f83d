<?php
/**
 * Boots WordPress the way every grader process does: the build-time install, the opcache
 * warm-up and the runner. Included from a function scope (wp-settings.php declares its globals).
 */

$_SERVER['HTTP_HOST']       = 'wpbench.test';
$_SERVER['SERVER_NAME']     = 'wpbench.test';
$_SERVER['SERVER_PORT']     = '80';
$_SERVER['SERVER_PROTOCOL'] = 'HTTP/1.1';
$_SERVER['REQUEST_METHOD']  = 'GET';
$_SERVER['REQUEST_URI']     = '/';
$_SERVER['REMOTE_ADDR']     = '127.0.0.1';
$_SERVER['HTTP_USER_AGENT'] = 'wpbench-grader';
$_SERVER['SCRIPT_NAME']     = '/index.php';
$_SERVER['PHP_SELF']        = '/index.php';

require_once '/opt/wordpress/wp-load.php';
